package rdbload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// pipeline sends commands on one connection with up to window of them unanswered, and reads
// the answers on its own goroutine. The first error answer stops it.
//
// inflight is both the window and the queue of unanswered commands: the writer puts each
// command's ring index in it before sending, the reader takes one out per answer. labels is
// a ring of window+2 entries naming each command's key (window in the channel, one the
// reader holds, one the writer fills before it may block), so the writer never overwrites a
// label the reader may still read.
type pipeline struct {
	conn     net.Conn
	w        *bufio.Writer
	inflight chan int
	labels   [][]byte // each command's key, cut after maxQuotedKey bytes
	lengths  []int    // each key's whole length
	verbs    []string // each command's name, for errors
	seq      int
	cmd      []byte // the command being encoded

	link   *link
	r      *bufio.Reader // the answers, read on the reader's goroutine once started
	failed chan struct{} // closed by the reader when it stops on an error
	err    error         // the reader's error, read after failed or done is closed
	done   chan struct{}
	stop   func() bool // stops the context's watch
}

func newPipeline(ctx context.Context, conn net.Conn, window int, idle time.Duration) *pipeline {
	l := &link{conn: conn, idle: idle}
	p := &pipeline{
		conn:     conn,
		link:     l,
		w:        bufio.NewWriterSize(writerOf(l), 64<<10),
		inflight: make(chan int, window),
		labels:   make([][]byte, window+2),
		lengths:  make([]int, window+2),
		verbs:    make([]string, window+2),
		failed:   make(chan struct{}),
		done:     make(chan struct{}),
	}
	p.stop = context.AfterFunc(ctx, l.cancel)
	p.r = bufio.NewReaderSize(readerOf(l), 64<<10)
	return p
}

// start starts reading answers: before it, nothing may be queued; after it, nothing else
// reads the connection. close needs it.
func (p *pipeline) start() { go p.read(p.r) }

// send queues one command, verb and label (a key, nil for a function library) naming it in
// errors, and waits when window commands are unanswered (after sending what is buffered).
func (p *pipeline) send(verb string, label []byte, args ...[]byte) error {
	i := p.seq % len(p.labels)
	// Only a key's first bytes are kept to name it: the ring holds window+2 of them.
	p.labels[i] = append(p.labels[i][:0], label[:min(len(label), maxQuotedKey)]...)
	p.lengths[i], p.verbs[i] = len(label), verb
	// Two non-blocking steps, cheap, rather than one select of three cases (a tenth of the
	// loader's CPU in BenchmarkLoadShardsAgainstRedisCLI's profile); the blocking select
	// only when the window is full.
	select {
	case <-p.failed:
		return p.err
	default:
	}
	select {
	case p.inflight <- i:
	default:
		if err := p.w.Flush(); err != nil {
			return fmt.Errorf("while sending commands: %w", err)
		}
		select {
		case p.inflight <- i:
		case <-p.failed:
			return p.err
		}
	}
	p.seq++
	// The command is encoded into cmd, but for large arguments, written as they are.
	p.cmd = append(p.cmd[:0], '*')
	cmd := p.cmd
	cmd = strconv.AppendInt(cmd, int64(len(args)), 10)
	for _, a := range args {
		cmd = append(cmd, "\r\n$"...)
		cmd = strconv.AppendInt(cmd, int64(len(a)), 10)
		cmd = append(cmd, "\r\n"...)
		if len(a) <= inlineArg {
			cmd = append(cmd, a...)
			continue
		}
		if _, err := p.w.Write(cmd); err != nil {
			return fmt.Errorf("while sending commands: %w", err)
		}
		if _, err := p.w.Write(a); err != nil {
			return fmt.Errorf("while sending commands: %w", err)
		}
		cmd = cmd[:0]
	}
	cmd = append(cmd, "\r\n"...)
	p.cmd = cmd
	if _, err := p.w.Write(cmd); err != nil {
		return fmt.Errorf("while sending commands: %w", err)
	}
	return nil
}

// The commands' names in errors.
const (
	verbFunction = "FUNCTION LOAD"
	verbRestore  = "RESTORE"
	verbSet      = "SET"
)

// inlineArg is the largest argument send copies into its command buffer.
const inlineArg = 4 << 10

// close ends the pipeline: with ok, after sending what is buffered and reading every answer;
// without, at once. It returns the first error of sending or of an answer.
func (p *pipeline) close(ok bool) error {
	defer p.stop()
	var err error
	if ok {
		err = p.w.Flush()
	}
	if !ok || err != nil {
		_ = p.conn.Close()
	}
	close(p.inflight)
	<-p.done
	_ = p.conn.Close()
	if !ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("while sending commands: %w", err)
	}
	return p.err
}

// read reads one answer per command taken from inflight, until inflight is closed and empty
// or an answer is an error.
func (p *pipeline) read(r *bufio.Reader) {
	defer close(p.done)
	for i := range p.inflight {
		if err := readReply(r); err != nil {
			var reply replyError
			if errors.As(err, &reply) {
				err = fmt.Errorf("the node refused %s: %s", p.what(i), string(reply))
			} else {
				err = fmt.Errorf("while reading the answer to %s: %w", p.what(i), err)
			}
			p.err = err
			close(p.failed)
			return
		}
	}
}

// what names command i of the ring.
func (p *pipeline) what(i int) string {
	if p.verbs[i] == verbFunction {
		return verbFunction + " of a function library"
	}
	if p.lengths[i] > len(p.labels[i]) {
		return fmt.Sprintf("%s of key %q... (%d bytes)", p.verbs[i], p.labels[i], p.lengths[i])
	}
	return fmt.Sprintf("%s of key %q", p.verbs[i], p.labels[i])
}

// replyError is an error answer of the node, without its leading "-".
type replyError string

func (e replyError) Error() string { return string(e) }

// readReply reads one answer: +..., :... and $... (skipped) are success, -... an error.
func readReply(r *bufio.Reader) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if len(line) < 3 {
		return fmt.Errorf("unexpected answer %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', ':':
		return nil
	case '-':
		return replyError(body)
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return fmt.Errorf("unexpected answer %q", line)
		}
		if n >= 0 {
			_, err = r.Discard(n + 2)
		}
		return err
	}
	return fmt.Errorf("unexpected answer %q", line)
}
