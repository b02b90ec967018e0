package configs

import (
	"fmt"
	"reflect"
	"time"
)

// The value types a key may have are those flatline's Config structs use:
// strings, bools, integers and durations, lists of them, and maps from name
// to them (timeouts.classes). checkLeafType refuses any other when the
// package starts, so a field of a new type fails every test at once rather
// than loading wrongly.

var durationType = reflect.TypeOf(time.Duration(0))

func checkLeafType(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Slice:
		if !isScalar(t.Elem()) {
			return fmt.Errorf("unsupported list element type %s", t.Elem())
		}
		return nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String || !isScalar(t.Elem()) {
			return fmt.Errorf("unsupported map type %s", t)
		}
		return nil
	}
	if !isScalar(t) {
		return fmt.Errorf("unsupported type %s", t)
	}
	return nil
}

func isScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Float64:
		return true
	}
	return false
}

// want names what a value of type t looks like, for errors.
func want(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration such as "1500ms"`
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Slice:
		return "a YAML list"
	case t.Kind() == reflect.Map:
		return "a YAML mapping"
	case t.Kind() == reflect.Float64:
		return "a number"
	}
	return "an integer"
}
