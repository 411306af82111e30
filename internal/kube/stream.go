package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// A list is read as a stream and decoded one item at a time, so that memory
// holds one item of it, never the whole response (a hundred thousand pods
// are gigabytes of protobuf). The decoders below fail closed: a response
// that ends before its last byte, that is not the list asked for, or that
// carries anything after it is an error, never a shorter list. A truncated
// response is io.ErrUnexpectedEOF, which the retry policy retries.

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

// errIdle is returned when a list stream stops delivering data.
var errIdle = errors.New("the API server sent no data")

// stream GETs req and hands its body to decode. The request is not bounded
// as a whole (a list of a hundred thousand pods may take minutes to serve on
// a busy server) but by its progress: idle without a byte for idle, it is
// cancelled and fails with a timeout the retry policy retries.
func stream(ctx context.Context, req *rest.Request, accept string, idle time.Duration, decode func(io.Reader) (string, error)) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var idled atomic.Bool
	t := time.AfterFunc(idle, func() {
		idled.Store(true)
		cancel()
	})
	defer t.Stop()
	wrap := func(err error) error {
		if idled.Load() {
			return fmt.Errorf("%w for %s: %w", errIdle, idle, context.DeadlineExceeded)
		}
		return err
	}
	body, err := req.SetHeader("Accept", accept).Stream(ctx)
	if err != nil {
		return "", wrap(err)
	}
	defer body.Close()
	cont, err := decode(&idleReader{r: body, t: t, idle: idle})
	if err != nil {
		return "", wrap(err)
	}
	return cont, nil
}

// idleReader pushes the idle deadline back on every byte read.
type idleReader struct {
	r    io.Reader
	t    *time.Timer
	idle time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.t.Reset(i.idle)
	}
	return n, err
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

// readProtoList decodes a protobuf list response of kind (e.g. "PodList")
// and calls item with the bytes of each item, one at a time (they are only
// valid during the call). It returns the list's continue token.
func readProtoList(body io.Reader, kind string, item func([]byte) error) (string, error) {
	c := &protoReader{r: bufio.NewReaderSize(body, 64<<10)}
	var magic [len(protoMagic)]byte
	if _, err := io.ReadFull(c, magic[:]); err != nil {
		return "", fmt.Errorf("read %s: %w", kind, noEOF(err))
	}
	if string(magic[:]) != protoMagic {
		return "", fmt.Errorf("read %s: the response is not protobuf", kind)
	}
	var (
		cont, got string
		sawList   bool
		buf       []byte
	)
	for {
		num, typ, err := c.tag()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", kind, err)
		}
		switch {
		case num == unknownTypeMeta && typ == protowire.BytesType:
			b, err := c.bytes(nil)
			if err != nil {
				return "", fmt.Errorf("read %s: %w", kind, err)
			}
			k, err := lastField(b, typeMetaKind)
			if err != nil {
				return "", fmt.Errorf("read %s: its type: %w", kind, err)
			}
			got = string(k)
		case num == unknownRaw && typ == protowire.BytesType:
			if sawList {
				return "", fmt.Errorf("read %s: two lists in one response", kind)
			}
			sawList = true
			n, err := c.varint()
			if err != nil {
				return "", fmt.Errorf("read %s: %w", kind, noEOF(err))
			}
			end := c.n + int64(n)
			for c.n < end {
				num, typ, err := c.tag()
				if err != nil {
					return "", fmt.Errorf("read %s: %w", kind, noEOF(err))
				}
				switch {
				case num == listMetadata && typ == protowire.BytesType:
					b, err := c.bytes(nil)
					if err != nil {
						return "", fmt.Errorf("read %s: %w", kind, err)
					}
					c, err := lastField(b, listMetaCont)
					if err != nil {
						return "", fmt.Errorf("read %s: its metadata: %w", kind, err)
					}
					cont = string(c)
				case num == listItems && typ == protowire.BytesType:
					if buf, err = c.bytes(buf); err != nil {
						return "", fmt.Errorf("read %s: %w", kind, err)
					}
					if err := item(buf); err != nil {
						return "", fmt.Errorf("read %s: %w", kind, err)
					}
				default:
					if err := c.skip(typ); err != nil {
						return "", fmt.Errorf("read %s: %w", kind, err)
					}
				}
			}
			if c.n != end {
				return "", fmt.Errorf("read %s: an item overruns the list", kind)
			}
		default:
			if err := c.skip(typ); err != nil {
				return "", fmt.Errorf("read %s: %w", kind, err)
			}
		}
	}
	if !sawList {
		return "", fmt.Errorf("read %s: the response holds no list: %w", kind, io.ErrUnexpectedEOF)
	}
	if got != kind {
		return "", fmt.Errorf("read %s: the response is a %q", kind, got)
	}
	return cont, nil
}

// readJSONList decodes a JSON list response of kind (e.g.
// "VolumeSnapshotList") and calls item once per element of items, with the
// decoder positioned on it. It returns the list's continue token.
func readJSONList(body io.Reader, kind string, item func(*json.Decoder) error) (string, error) {
	fail := func(err error) (string, error) { return "", fmt.Errorf("read %s: %w", kind, noEOF(err)) }
	dec := json.NewDecoder(bufio.NewReaderSize(body, 64<<10))
	if err := delim(dec, '{'); err != nil {
		return fail(err)
	}
	var (
		cont, got string
		sawItems  bool
	)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		switch t {
		case "kind":
			if err := dec.Decode(&got); err != nil {
				return fail(err)
			}
		case "metadata":
			var m metav1.ListMeta
			if err := dec.Decode(&m); err != nil {
				return fail(err)
			}
			cont = m.Continue
		case "items":
			if sawItems {
				return fail(errors.New("items appears twice"))
			}
			sawItems = true
			t, err := dec.Token()
			if err != nil {
				return fail(err)
			}
			if t == nil {
				continue // "items": null is an empty list
			}
			if t != json.Delim('[') {
				return fail(fmt.Errorf("items is not an array but %v", t))
			}
			for dec.More() {
				if err := item(dec); err != nil {
					return fail(err)
				}
			}
			if err := delim(dec, ']'); err != nil {
				return fail(err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fail(err)
			}
		}
	}
	if err := delim(dec, '}'); err != nil {
		return fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(errors.New("data after the list"))
	}
	if !sawItems {
		return fail(errors.New("the response holds no items"))
	}
	if got != kind {
		return fail(fmt.Errorf("the response is a %q", got))
	}
	return cont, nil
}

func delim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("got %v where %v was expected", t, want)
	}
	return nil
}

// eachField calls fn with every length-delimited field of a message; other
// wire types are skipped. A malformed message is an error.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			if err := fn(num, v); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
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
