// Package secret reads the passwords of the configuration (redis.password,
// redis.sentinel.password, kafka.sasl.password) from where they are set:
// the key itself, or a file named by the key's _file sibling, which is how
// Kubernetes hands a Secret to a pod (a mounted file) without it showing up
// in the pod spec, the environment or `flatline config print`.
package secret

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Password returns the password of key: value, or, when file is set, the
// content of file less its trailing line ends (files written by hand or by
// `echo` end in one, which no password means). Setting both is an error:
// either would silently win over the other. Errors name key's _file sibling
// and never hold the password.
//
// The file is read on every call, so a caller that asks when it connects
// takes a rotated Secret at its next start.
func Password(key, value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s_file: set together with %s; set one of them", key, key)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s_file: %q: %v", key, file, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("%s_file: %q is empty", key, file)
	}
	return pw, nil
}
