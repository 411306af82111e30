package msgtmpl

import (
	"fmt"
	"reflect"
	"time"
)

// timeType is a scalar, not an object: a time prints as RFC 3339.
var timeType = reflect.TypeFor[time.Time]()

// SchemaOf is the schema of a struct type's exported fields, by their Go
// names: a struct field (other than a time) an object, a slice of structs a
// List, anything else a scalar. With DataOf, a message's type is the one
// definition of what a template may name and of what it reads, so the two
// cannot drift apart. It panics on a type that is not a struct: the caller's
// bug, found by its first test.
func SchemaOf(v any) Schema {
	return schemaOf(reflect.TypeOf(v))
}

func schemaOf(t reflect.Type) Schema {
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("msgtmpl.SchemaOf: %s is not a struct", t))
	}
	s := Schema{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct && ft != timeType:
			s[f.Name] = schemaOf(ft)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && ft.Elem() != timeType:
			s[f.Name] = List{Elem: schemaOf(ft.Elem())}
		default:
			s[f.Name] = nil
		}
	}
	return s
}

// DataOf is a struct's value as Execute reads it (the shape SchemaOf
// describes): objects map[string]any by field name, lists []any, integers
// int64, a nil pointer nil and any other pointer its value.
func DataOf(v any) map[string]any {
	d, _ := dataOf(reflect.ValueOf(v)).(map[string]any)
	return d
}

func dataOf(v reflect.Value) any {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			return v.Interface()
		}
		m := map[string]any{}
		for _, f := range reflect.VisibleFields(v.Type()) {
			if f.IsExported() && !f.Anonymous {
				m[f.Name] = dataOf(v.FieldByIndex(f.Index))
			}
		}
		return m
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return []any{}
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = dataOf(v.Index(i))
		}
		return out
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(v.Uint())
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	}
	return v.Interface()
}
