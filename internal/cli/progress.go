package cli

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// progress shows the rescue's counters: a live line on a terminal, a log
// line every 10 s otherwise.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	log      *zerolog.Logger
	last     rescue.Counts
	lastLog  time.Time
	stop     chan struct{}
	stopOnce sync.Once
}

func newProgress(w io.Writer, log *zerolog.Logger) *progress {
	p := &progress{w: w, log: log, stop: make(chan struct{}), lastLog: time.Now(), tty: term.IsTerminal(w)}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.render(drawTick)
			}
		}
	}()
	return p
}

func (p *progress) update(c rescue.Counts) {
	p.mu.Lock()
	p.last = c
	p.mu.Unlock()
	p.render(drawTick)
}

// drawWhen says whether a render is a periodic one or the last.
type drawWhen uint8

const (
	drawTick  drawWhen = iota // every second, or on new counters
	drawFinal                 // the last, once the rescue is over
)

func (p *progress) render(when drawWhen) {
	final := when == drawFinal
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.last
	if c.Total == 0 {
		return
	}
	el := time.Since(c.Started).Truncate(time.Second)
	if p.tty {
		fmt.Fprintf(p.w, "\rrescue: %d/%d created, %d ready, %d failed, %d pending, %s elapsed ", c.Created, c.Total, c.Ready, c.Failed, c.Pending, el)
		if final {
			fmt.Fprintln(p.w)
		}
		return
	}
	if final || time.Since(p.lastLog) >= 10*time.Second {
		p.lastLog = time.Now()
		p.log.Info().Int("total", c.Total).Int("created", c.Created).Int("ready", c.Ready).Int("failed", c.Failed).
			Int("pending", c.Pending).Dur("elapsed", el).Msg("rescue progress")
	}
}

// done stops the ticker and shows the final counters, once.
func (p *progress) done() {
	p.stopOnce.Do(func() {
		close(p.stop)
		p.render(drawFinal)
	})
}
