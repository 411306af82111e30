package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReadJSONList decodes a JSON list response of kind (e.g.
// "VolumeSnapshotList") and calls item once per element of items, with the
// decoder positioned on it. It returns the list's continue token.
func ReadJSONList(body io.Reader, kind string, item func(*json.Decoder) error) (string, error) {
	cont, err := readJSONList(body, kind, item)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", kind, noEOF(err))
	}
	return cont, nil
}

// jsonList is the state of one JSON list being read. Its methods return
// the decoder's errors unwrapped, so that an end of stream is seen as such
// (and turned into a truncation) by ReadJSONList.
type jsonList struct {
	dec       *json.Decoder
	item      func(*json.Decoder) error
	cont, got string
	sawItems  bool
}

func readJSONList(body io.Reader, kind string, item func(*json.Decoder) error) (string, error) {
	l := &jsonList{dec: json.NewDecoder(bufio.NewReaderSize(body, 64<<10)), item: item}
	if err := delim(l.dec, '{'); err != nil {
		return "", err
	}
	for l.dec.More() {
		if err := l.field(); err != nil {
			return "", err
		}
	}
	if err := delim(l.dec, '}'); err != nil {
		return "", err
	}
	if _, err := l.dec.Token(); err != io.EOF {
		return "", errors.New("data after the list")
	}
	if !l.sawItems {
		return "", errors.New("the response holds no items")
	}
	if l.got != kind {
		return "", fmt.Errorf("the response is a %q", l.got)
	}
	return l.cont, nil
}

// field reads one field of the list object: kind, metadata and items are
// kept, anything else is skipped.
func (l *jsonList) field() error {
	t, err := l.dec.Token()
	if err != nil {
		return err
	}
	switch t {
	case "kind":
		return l.dec.Decode(&l.got)
	case "metadata":
		var m metav1.ListMeta
		if err := l.dec.Decode(&m); err != nil {
			return err
		}
		l.cont = m.Continue
		return nil
	case "items":
		return l.items()
	default:
		var skip json.RawMessage
		return l.dec.Decode(&skip)
	}
}

// items hands each element of the items array to the item function.
func (l *jsonList) items() error {
	if l.sawItems {
		return errors.New("items appears twice")
	}
	l.sawItems = true
	t, err := l.dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil // "items": null is an empty list
	}
	if t != json.Delim('[') {
		return fmt.Errorf("items is not an array but %v", t)
	}
	for l.dec.More() {
		if err := l.item(l.dec); err != nil {
			return err
		}
	}
	return delim(l.dec, ']')
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
