package configs

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// fromString converts an override (environment variable or flag) to a value
// of type t. A string has no YAML structure, so lists are comma-separated
// ("a:1,b:2"; spaces around items are trimmed, empty items dropped) and maps
// are comma-separated name=value pairs. An empty string is an empty list or
// map. Errors carry no key; the caller prefixes it.
func fromString(t reflect.Type, s string) (reflect.Value, error) {
	switch t.Kind() {
	case reflect.Slice:
		out := reflect.Zero(t)
		for _, item := range listItems(s) {
			v, err := scalarFromString(t.Elem(), item)
			if err != nil {
				return reflect.Value{}, err
			}
			out = reflect.Append(out, v)
		}
		return out, nil
	case reflect.Map:
		out := reflect.Zero(t)
		for _, pair := range listItems(s) {
			name, val, ok := strings.Cut(pair, "=")
			name, val = strings.TrimSpace(name), strings.TrimSpace(val)
			if !ok || name == "" {
				return reflect.Value{}, fmt.Errorf("want name=value pairs separated by commas, got %q", pair)
			}
			if out.IsNil() {
				out = reflect.MakeMap(t)
			}
			k := reflect.ValueOf(name).Convert(t.Key())
			if out.MapIndex(k).IsValid() {
				return reflect.Value{}, fmt.Errorf("%q given twice", name)
			}
			v, err := scalarFromString(t.Elem(), val)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("%s: %w", name, err)
			}
			out.SetMapIndex(k, v)
		}
		return out, nil
	}
	return scalarFromString(t, s)
}

// listItems splits an override's list at commas, trimming the items and
// dropping empty ones.
func listItems(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// scalarFromString parses one value as strictly as scalarFromNode: a
// duration needs its unit, a bool is what strconv.ParseBool takes.
func scalarFromString(t reflect.Type, s string) (reflect.Value, error) {
	v := reflect.New(t).Elem()
	switch {
	case t == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("invalid duration %q", s)
		}
		v.SetInt(int64(d))
	case t.Kind() == reflect.String:
		v.SetString(s)
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("want %s, got %q", want(t), s)
		}
		v.SetBool(b)
	case t.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("want %s, got %q", want(t), s)
		}
		v.SetFloat(f)
	default: // an integer, the last type checkLeafType admits
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(i) {
			return reflect.Value{}, fmt.Errorf("want %s, got %q", want(t), s)
		}
		v.SetInt(i)
	}
	return v, nil
}
