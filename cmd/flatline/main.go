// Command flatline tells you when a device goes silent. See README.md.
package main

import "os"

func main() {
	os.Exit(execute(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}
