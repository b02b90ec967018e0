package avro

import (
	"errors"
	"fmt"

	hamba "github.com/hamba/avro/v2"
)

// Kind is what a Value holds.
type Kind uint8

const (
	// KindOther is anything Lookup does not read: a boolean, bytes, fixed,
	// an array, a record or map (the end of a path that goes on), a
	// decimal, a date or a time of day.
	KindOther Kind = iota
	// KindString is a string (with any logical type, e.g. uuid) or an
	// enum's symbol, in Value.Str.
	KindString
	// KindInt is an int or a long, in Value.Int; local-timestamp-millis and
	// -micros are longs too (a local time names no instant).
	KindInt
	// KindFloat is a float or a double, in Value.Float.
	KindFloat
	// KindTime is a long with logical type timestamp-millis or
	// timestamp-micros, in Value.TimeMs as Unix milliseconds (fractions of
	// a millisecond truncated).
	KindTime
	// KindNull is null: a union's null branch, or a null field.
	KindNull
)

// String names the kind as Avro does.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindTime:
		return "timestamp"
	case KindNull:
		return "null"
	}
	return "other"
}

// Value is a field of a Record; Kind says which other field holds it.
type Value struct {
	Kind   Kind
	Str    string
	Int    int64
	Float  float64
	TimeMs int64
}

// Record is a decoded value. The zero Record has no fields.
type Record struct {
	id   int
	root *record
}

// SchemaID is the schema id the value named.
func (rec Record) SchemaID() int { return rec.id }

// Lookup walks path from the top record: through a record by field name,
// through a map by key, and through a union to its branch. It is false
// when a field or key is missing, or the path goes through something else
// (null included). An empty path is the record itself (KindOther).
func (rec Record) Lookup(path []string) (Value, bool) {
	if rec.root == nil {
		return Value{}, false
	}
	var cur any = rec.root
	for _, name := range path {
		switch c := cur.(type) {
		case *record:
			i, ok := c.field(name)
			if !ok {
				return Value{}, false
			}
			cur = c.values[i]
		case map[string]any:
			v, ok := c[name]
			if !ok {
				return Value{}, false
			}
			cur = v
		default:
			return Value{}, false
		}
	}
	switch c := cur.(type) {
	case string:
		return Value{Kind: KindString, Str: c}, true
	case int64:
		return Value{Kind: KindInt, Int: c}, true
	case float64:
		return Value{Kind: KindFloat, Float: c}, true
	case timeMs:
		return Value{Kind: KindTime, TimeMs: int64(c)}, true
	case nil:
		return Value{Kind: KindNull}, true
	}
	return Value{Kind: KindOther}, true
}

// The decoded tree: a record is a *record, a map a map[string]any, a union
// its branch's value; the leaves Lookup reads are string, int64, float64,
// timeMs and nil (null); everything else is other.
type (
	record struct {
		schema *hamba.RecordSchema
		values []any // by the schema's field order
	}
	timeMs int64
	other  struct{}
)

func (r *record) field(name string) (int, bool) {
	for i, f := range r.schema.Fields() {
		if f.Name() == name {
			return i, true
		}
	}
	return 0, false
}

// maxDepth bounds how deep a value may nest (a record's field, a union's
// branch, an array's item and a map's value each go one level down): a
// recursive schema lets a value nest as deep as its bytes allow, and the
// decoder recurses once per level.
const maxDepth = 128

// errTooDeep is a value nested deeper than maxDepth.
var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxDepth)

// decodeBody decodes body, all of it, as one value of schema, which must
// be a record. It reads with hamba's Reader (varints, lengths checked
// against Config.MaxByteSliceSize), walking the schema itself: hamba's
// generic decoding into any wraps a union's branch in a map or not
// depending on which Go types are registered, and its ReadNext does not
// stop an array's block at an error, so a few bytes claiming 2^60 items
// would append 2^60 of them.
func decodeBody(schema hamba.Schema, body []byte) (Record, error) {
	rs, ok := deref(schema).(*hamba.RecordSchema)
	if !ok {
		return Record{}, fmt.Errorf("the schema is a %s, not a record", schema.Type())
	}
	r := hamba.NewReader(nil, 0).Reset(body)
	d := bodyDecoder{r: r}
	v := d.record(rs, 0)
	if r.Error != nil {
		return Record{}, r.Error
	}
	if r.Peek(); r.Error == nil {
		return Record{}, errors.New("bytes left after the record")
	}
	return Record{root: v}, nil
}

// bodyDecoder decodes one body; the first error stops it (r.Error).
type bodyDecoder struct {
	r *hamba.Reader
}

func (d *bodyDecoder) record(s *hamba.RecordSchema, depth int) *record {
	fields := s.Fields()
	rec := &record{schema: s, values: make([]any, len(fields))}
	for i, f := range fields {
		rec.values[i] = d.value(f.Type(), depth+1)
		if d.r.Error != nil {
			return nil
		}
	}
	return rec
}

func (d *bodyDecoder) value(s hamba.Schema, depth int) any {
	if depth > maxDepth {
		d.r.Error = errTooDeep
		return nil
	}
	r := d.r
	switch s := deref(s).(type) {
	case *hamba.NullSchema:
		return nil
	case *hamba.PrimitiveSchema:
		return d.primitive(s)
	case *hamba.RecordSchema:
		return d.record(s, depth)
	case *hamba.EnumSchema:
		i := r.ReadInt()
		if symbols := s.Symbols(); i >= 0 && int(i) < len(symbols) {
			return symbols[i]
		}
		r.ReportError("enum", fmt.Sprintf("symbol %d of %d", i, len(s.Symbols())))
	case *hamba.FixedSchema:
		r.SkipNBytes(s.Size())
		return other{}
	case *hamba.UnionSchema:
		types := s.Types()
		i := r.ReadLong()
		if i >= 0 && i < int64(len(types)) {
			return d.value(types[i], depth+1)
		}
		r.ReportError("union", fmt.Sprintf("branch %d of %d", i, len(types)))
	case *hamba.ArraySchema:
		d.blocks(func() { d.value(s.Items(), depth+1) }, zeroWidth(s.Items(), 0))
		return other{}
	case *hamba.MapSchema:
		m := make(map[string]any)
		d.blocks(func() {
			k := r.ReadString()
			if r.Error == nil {
				m[k] = d.value(s.Values(), depth+1)
			}
		}, false)
		return m
	default:
		r.ReportError("decode", fmt.Sprintf("unexpected schema type %s", s.Type()))
	}
	return nil
}

func (d *bodyDecoder) primitive(s *hamba.PrimitiveSchema) any {
	r := d.r
	var logical hamba.LogicalType
	if ls := s.Logical(); ls != nil {
		logical = ls.Type()
	}
	switch s.Type() {
	case hamba.String:
		return r.ReadString()
	case hamba.Int:
		i := r.ReadInt()
		if logical == hamba.Date || logical == hamba.TimeMillis {
			return other{}
		}
		return int64(i)
	case hamba.Long:
		i := r.ReadLong()
		switch logical {
		case hamba.TimestampMillis:
			return timeMs(i)
		case hamba.TimestampMicros:
			return timeMs(i / 1000)
		case hamba.TimeMicros:
			return other{}
		}
		return i
	case hamba.Float:
		return float64(r.ReadFloat())
	case hamba.Double:
		return r.ReadDouble()
	case hamba.Boolean:
		r.ReadBool()
	case hamba.Bytes:
		// Not r.SkipBytes: it takes a negative length for an empty one.
		if n := r.ReadLong(); n >= 0 {
			r.SkipNBytes(int(n))
		} else {
			r.ReportError("bytes", fmt.Sprintf("length %d", n))
		}
	default:
		r.ReportError("decode", fmt.Sprintf("unexpected primitive type %s", s.Type()))
		return nil
	}
	return other{}
}

// blocks reads an array's or a map's blocks, calling item once per item.
// An item of no bytes (zeroWidth) is not read at all: nothing bounds how
// many a block may claim.
func (d *bodyDecoder) blocks(item func(), zeroWidth bool) {
	r := d.r
	for {
		n, _ := r.ReadBlockHeader()
		if r.Error != nil || n == 0 {
			return
		}
		if n < 0 {
			r.ReportError("block", fmt.Sprintf("count %d", n))
			return
		}
		if zeroWidth {
			continue
		}
		for ; n > 0; n-- {
			item()
			if r.Error != nil {
				return
			}
		}
	}
}

// zeroWidth tells whether every value of s is encoded in no bytes: null, a
// fixed of size 0, a record of such fields.
func zeroWidth(s hamba.Schema, depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch s := deref(s).(type) {
	case *hamba.NullSchema:
		return true
	case *hamba.FixedSchema:
		return s.Size() == 0
	case *hamba.RecordSchema:
		for _, f := range s.Fields() {
			if !zeroWidth(f.Type(), depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// deref resolves a reference to a named schema defined elsewhere in the
// schema (recursive types).
func deref(s hamba.Schema) hamba.Schema {
	if ref, ok := s.(*hamba.RefSchema); ok {
		return ref.Schema()
	}
	return s
}
