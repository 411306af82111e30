package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers from k8s.io/apimachinery/pkg/runtime/generated.proto,
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto and the list types of
// k8s.io/api (every List message has metadata = 1, items = 2).
const (
	unknownTypeMeta = 1 // runtime.Unknown.typeMeta
	unknownRaw      = 2 // runtime.Unknown.raw
	typeMetaKind    = 2 // runtime.TypeMeta.kind
	listMetadata    = 1 // <Kind>List.metadata
	listItems       = 2 // <Kind>List.items
	listMetaCont    = 3 // ListMeta.continue

	// maxItem bounds one item of a list: etcd refuses values over 1.5 MiB
	// by default; anything near this is a corrupt length, not an object.
	maxItem = 64 << 20
)

// protoMagic starts every protobuf response of the API server.
const protoMagic = "k8s\x00"

// ReadProtoList decodes a protobuf list response of kind (e.g. "PodList")
// and calls item with the bytes of each item, one at a time (they are only
// valid during the call). It returns the list's continue token.
func ReadProtoList(body io.Reader, kind string, item func([]byte) error) (string, error) {
	cont, err := readProtoList(body, kind, item)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", kind, err)
	}
	return cont, nil
}

// protoList is the state of one protobuf list being read: the envelope (a
// runtime.Unknown) names the list's kind and holds the list as raw bytes,
// which are walked as they stream in, item by item.
type protoList struct {
	c         *protoReader
	item      func([]byte) error
	cont, got string
	sawList   bool
	buf       []byte // the current item, reused
}

func readProtoList(body io.Reader, kind string, item func([]byte) error) (string, error) {
	c := &protoReader{r: bufio.NewReaderSize(body, 64<<10)}
	var magic [len(protoMagic)]byte
	if _, err := io.ReadFull(c, magic[:]); err != nil {
		return "", noEOF(err)
	}
	if string(magic[:]) != protoMagic {
		return "", errors.New("the response is not protobuf")
	}
	l := &protoList{c: c, item: item}
	if err := l.envelope(); err != nil {
		return "", err
	}
	if !l.sawList {
		return "", fmt.Errorf("the response holds no list: %w", io.ErrUnexpectedEOF)
	}
	if l.got != kind {
		return "", fmt.Errorf("the response is a %q", l.got)
	}
	return l.cont, nil
}

// envelope reads the fields of the runtime.Unknown up to the end of the
// stream.
func (l *protoList) envelope() error {
	for {
		num, typ, err := l.c.tag()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case num == unknownTypeMeta && typ == protowire.BytesType:
			err = l.typeMeta()
		case num == unknownRaw && typ == protowire.BytesType:
			err = l.list()
		default:
			err = l.c.skip(typ)
		}
		if err != nil {
			return err
		}
	}
}

// typeMeta reads the envelope's type: the kind of the list it holds.
func (l *protoList) typeMeta() error {
	b, err := l.c.bytes(nil)
	if err != nil {
		return err
	}
	k, err := lastField(b, typeMetaKind)
	if err != nil {
		return fmt.Errorf("its type: %w", err)
	}
	l.got = string(k)
	return nil
}

// list reads the <Kind>List message, which must end exactly where its
// length says.
func (l *protoList) list() error {
	if l.sawList {
		return errors.New("two lists in one response")
	}
	l.sawList = true
	n, err := l.c.varint()
	if err != nil {
		return noEOF(err)
	}
	end := l.c.n + int64(n)
	for l.c.n < end {
		if err := l.listField(); err != nil {
			return err
		}
	}
	if l.c.n != end {
		return errors.New("an item overruns the list")
	}
	return nil
}

// listField reads one field of the list: its metadata (for the continue
// token) or one item; anything else is skipped.
func (l *protoList) listField() error {
	num, typ, err := l.c.tag()
	if err != nil {
		return noEOF(err)
	}
	switch {
	case num == listMetadata && typ == protowire.BytesType:
		b, err := l.c.bytes(nil)
		if err != nil {
			return err
		}
		c, err := lastField(b, listMetaCont)
		if err != nil {
			return fmt.Errorf("its metadata: %w", err)
		}
		l.cont = string(c)
		return nil
	case num == listItems && typ == protowire.BytesType:
		if l.buf, err = l.c.bytes(l.buf); err != nil {
			return err
		}
		return l.item(l.buf)
	default:
		return l.c.skip(typ)
	}
}

// protoReader reads protobuf wire format from a stream, counting bytes.
type protoReader struct {
	r *bufio.Reader
	n int64
}

func (c *protoReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *protoReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *protoReader) varint() (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := c.ReadByte()
		if err != nil {
			if err == io.EOF && shift > 0 {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, errors.New("protobuf: varint overflows 64 bits")
}

func (c *protoReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := c.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, fmt.Errorf("protobuf: invalid field number %d", num)
	}
	return num, typ, nil
}

// bytes reads a length-delimited value into buf (grown as needed).
func (c *protoReader) bytes(buf []byte) ([]byte, error) {
	n, err := c.varint()
	if err != nil {
		return nil, noEOF(err)
	}
	if n > maxItem {
		return nil, fmt.Errorf("protobuf: a field of %d bytes", n)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n, n+n/4)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, noEOF(err)
	}
	return buf, nil
}

func (c *protoReader) skip(typ protowire.Type) error {
	var err error
	switch typ {
	case protowire.VarintType:
		_, err = c.varint()
	case protowire.Fixed32Type:
		_, err = io.CopyN(io.Discard, c, 4)
	case protowire.Fixed64Type:
		_, err = io.CopyN(io.Discard, c, 8)
	case protowire.BytesType:
		var n uint64
		if n, err = c.varint(); err == nil {
			_, err = io.CopyN(io.Discard, c, int64(n))
		}
	default:
		return fmt.Errorf("protobuf: unsupported wire type %d", typ)
	}
	return noEOF(err)
}

// noEOF turns an end of stream inside a value into a truncation.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// eachField calls fn with every length-delimited field of a message; other
// wire types are skipped. A malformed message is an error.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	return walkFields(b, 0, fn)
}

// walkFields is eachField (read 0: every length-delimited field, other wire
// types skipped) and readFields (only the fields in read, each of which must
// be length-delimited) in one loop.
func walkFields(b []byte, read uint64, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		wanted := read == 0 || num < 64 && read&(1<<num) != 0
		if wanted && read != 0 && typ != protowire.BytesType {
			return fmt.Errorf("protobuf: field %d has wire type %d", num, typ)
		}
		if !wanted || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			b = b[m:]
			continue
		}
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		if err := fn(num, v); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

// lastField returns the last length-delimited field num of a message (the
// protobuf rule for a repeated scalar field), nil when absent. A malformed
// message is an error, never an absent field: a claim name or a continue
// token read as empty would make a list look shorter than it is.
func lastField(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	err := eachField(b, func(n protowire.Number, v []byte) error {
		if n == num {
			out = v
		}
		return nil
	})
	return out, err
}

// varintField returns the last varint field num of message b (0 when absent).
func varintField(b []byte, num protowire.Number) (int64, error) {
	var out int64
	for len(b) > 0 {
		n, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		b = b[m:]
		if n == num && typ == protowire.VarintType {
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return 0, protowire.ParseError(k)
			}
			out = int64(v)
			b = b[k:]
			continue
		}
		k := protowire.ConsumeFieldValue(n, typ, b)
		if k < 0 {
			return 0, protowire.ParseError(k)
		}
		b = b[k:]
	}
	return out, nil
}
