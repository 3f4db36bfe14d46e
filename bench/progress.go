package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progressBar shows how a phase is going: records scheduled so far, delivered,
// and waiting in kdelay. It redraws from its own goroutine, so that reading
// the counters never waits on a terminal.
type progressBar struct {
	bar    *progressbar.ProgressBar
	w      io.Writer
	title  string
	counts func() (scheduled, delivered int64)
	quit   chan struct{}
	done   chan struct{}
}

// startProgress shows a bar on w until stop; nothing when w is nil.
func startProgress(w io.Writer, title string, total int, counts func() (scheduled, delivered int64)) *progressBar {
	p := &progressBar{w: w, title: title, counts: counts, quit: make(chan struct{}), done: make(chan struct{})}
	if w == nil || total == 0 {
		close(p.done)
		return p
	}
	p.bar = progressbar.NewOptions64(int64(total),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
	go p.loop()
	return p
}

func (p *progressBar) loop() {
	defer close(p.done)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		p.update()
		select {
		case <-p.quit:
			return
		case <-tick.C:
		}
	}
}

func (p *progressBar) update() {
	scheduled, delivered := p.counts()
	_ = p.bar.Set64(delivered)
	p.bar.Describe(fmt.Sprintf("%s: scheduled %d, delivered %d, waiting %d", p.title, scheduled, delivered, scheduled-delivered))
}

// stop draws the bar a last time, as it is, and ends its line.
func (p *progressBar) stop() {
	if p.bar == nil {
		return
	}
	close(p.quit)
	<-p.done
	p.update()
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}
