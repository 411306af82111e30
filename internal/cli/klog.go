package cli

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// client-go logs through klog, straight to stderr, whatever the run's
// --log-level and --log-format: a connection reset while a response body
// is read ("Unexpected error when reading response body") printed a klog
// line beside a refused restore's one-line error (found by the chaos test,
// iteration 104 on the stack without the Unused condition). The janitor
// retries such failures and reports what it could not do; client-go's
// own lines are detail, so they go into the run's log at debug level, in
// its format, and nowhere else.

// routeKlog sends every klog line (client-go's) to log at debug level.
func routeKlog(log zerolog.Logger) {
	klog.SetLogger(logr.New(&klogSink{log: log}))
}

// klogSink is a logr.LogSink writing to a zerolog logger at debug level.
type klogSink struct {
	log  zerolog.Logger
	name string
	kv   []any
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(int) bool { return s.log.GetLevel() <= zerolog.DebugLevel }

func (s *klogSink) Info(_ int, msg string, kv ...any) { s.write(nil, msg, kv) }

func (s *klogSink) Error(err error, msg string, kv ...any) { s.write(err, msg, kv) }

func (s *klogSink) write(err error, msg string, kv []any) {
	e := s.log.Debug()
	if !e.Enabled() {
		return
	}
	e = e.Str("source", "client-go")
	if s.name != "" {
		e = e.Str("logger", s.name)
	}
	if err != nil {
		e = e.Err(err)
	}
	all := append(append([]any{}, s.kv...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		e = e.Interface(fmt.Sprint(all[i]), all[i+1])
	}
	e.Msg(msg)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.kv = append(append([]any{}, s.kv...), kv...)
	return &c
}

func (s *klogSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "/" + name
	}
	c.name = name
	return &c
}
