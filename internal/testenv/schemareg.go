package testenv

import (
	"testing"

	"github.com/flatline-dev/flatline/internal/schemareg"
)

// SchemaRegistry serves an empty schema registry on a free loopback port
// until the test ends.
func SchemaRegistry(t testing.TB, opts ...schemareg.Option) *schemareg.Server {
	t.Helper()
	srv, err := schemareg.Start("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
