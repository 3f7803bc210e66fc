package rdbload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// pipeline sends commands on one connection with up to about window of them unanswered,
// and reads the answers on its own goroutine. The first error answer stops it.
//
// The writer hands the reader its commands in batches (a token per batch of up to batch
// commands, through inflight, whose room is the window): a channel operation and a wake-up
// per command cost the loader more than encoding the command did. labels is a ring naming
// each command's key, long enough for every command the writer may have queued before it
// blocks (the window's tokens, the batch the reader holds, the one the writer fills), so the
// writer never overwrites a label the reader may still read.
type pipeline struct {
	conn     net.Conn
	w        *bufio.Writer
	inflight chan batchToken
	batch    int      // commands per token
	first    int      // seq of the first command of the batch being filled
	labels   [][]byte // each command's key, cut after maxQuotedKey bytes
	lengths  []int    // each key's whole length
	verbs    []string // each command's name, for errors
	seq      int
	cmd      []byte // the command being encoded
	label    []byte // an MSET's label

	link   *link
	r      *bufio.Reader // the answers, read on the reader's goroutine once started
	failed chan struct{} // closed by the reader when it stops on an error
	err    error         // the reader's error, read after failed or done is closed
	done   chan struct{}
	stop   func() bool // stops the context's watch
}

// batchToken is n commands from seq first on, whose answers the reader is to read.
type batchToken struct{ first, n int }

// batchOf is the number of commands per token for a window: a sixteenth of it, at least 1.
func batchOf(window int) int { return max(1, window/16) }

func newPipeline(ctx context.Context, conn net.Conn, window int, idle time.Duration) *pipeline {
	l := &link{conn: conn, idle: idle}
	batch := batchOf(window)
	tokens := max(1, window/batch)
	ring := (tokens + 2) * batch
	p := &pipeline{
		conn:     conn,
		link:     l,
		w:        bufio.NewWriterSize(writerOf(l), 64<<10),
		inflight: make(chan batchToken, tokens),
		batch:    batch,
		labels:   make([][]byte, ring),
		lengths:  make([]int, ring),
		verbs:    make([]string, ring),
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
// errors; once a batch is full it hands it to the reader, waiting when the window is full
// (after sending what is buffered).
func (p *pipeline) send(verb string, label []byte, args ...[]byte) error {
	return p.enqueue(verb, label, len(label), args)
}

// sendMSet queues MSET of n keys whose arguments (key, value, ... as RESP bulk strings) args
// holds, named in errors by its keys (msetLabel).
func (p *pipeline) sendMSet(n int, args []byte) error {
	p.label = msetLabelOf(p.label[:0], args)
	p.note(verbMSet, p.label, n)
	p.cmd = append(p.cmd[:0], '*')
	p.cmd = strconv.AppendInt(p.cmd, int64(1+2*n), 10)
	p.cmd = append(p.cmd, "\r\n$4\r\nMSET\r\n"...)
	if _, err := p.w.Write(p.cmd); err != nil {
		return fmt.Errorf("while sending commands: %w", err)
	}
	if _, err := p.w.Write(args); err != nil {
		return fmt.Errorf("while sending commands: %w", err)
	}
	return p.handOverIfFull()
}

// msetLabelOf appends to label the first keys of an MSET's arguments, each as a length byte
// (with labelCut when the key is cut) and up to maxMSetLabelKey bytes, as many as fit in
// maxQuotedKey bytes.
func msetLabelOf(label, args []byte) []byte {
	for i := 0; len(args) > 0; i++ {
		// $<len>\r\n<bytes>\r\n
		end := bytes.IndexByte(args, '\r')
		n, err := strconv.Atoi(string(args[1:max(1, end)]))
		if end < 0 || err != nil || end+2+n+2 > len(args) {
			return label
		}
		arg := args[end+2 : end+2+n]
		args = args[end+2+n+2:]
		if i%2 == 1 {
			continue // a value
		}
		shown, mark := arg, byte(0)
		if len(shown) > maxMSetLabelKey {
			shown, mark = shown[:maxMSetLabelKey], labelCut
		}
		if len(label)+1+len(shown) > maxQuotedKey {
			return label
		}
		label = append(append(label, byte(len(shown))|mark), shown...)
	}
	return label
}

// maxMSetLabelKey is the most bytes of each key an MSET's label keeps; labelCut marks, in
// the length byte before it, a key cut there.
const (
	maxMSetLabelKey = 40
	labelCut        = 0x80
)

// note records the next command's verb, label and length (the label's whole length, or an
// MSET's count of keys) in the ring that names commands in errors.
func (p *pipeline) note(verb string, label []byte, length int) {
	i := p.seq % len(p.labels)
	// Only a key's first bytes are kept to name it: the ring holds a bounded number of them.
	p.labels[i] = append(p.labels[i][:0], label[:min(len(label), maxQuotedKey)]...)
	p.lengths[i], p.verbs[i] = length, verb
	p.seq++
}

// enqueue is send with length, for note.
func (p *pipeline) enqueue(verb string, label []byte, length int, args [][]byte) error {
	p.note(verb, label, length)
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
	return p.handOverIfFull()
}

// handOverIfFull hands the batch being filled to the reader once it is full.
func (p *pipeline) handOverIfFull() error {
	if p.seq-p.first < p.batch {
		return nil
	}
	return p.handOver()
}

// handOver gives the reader the batch being filled (if any): at once when the window has
// room, else after sending what is buffered and waiting for room. It returns the reader's
// error once it stopped on one.
func (p *pipeline) handOver() error {
	if p.seq == p.first {
		return nil
	}
	t := batchToken{first: p.first, n: p.seq - p.first}
	p.first = p.seq
	select {
	case <-p.failed:
		return p.err
	case p.inflight <- t:
		return nil
	default:
	}
	if err := p.w.Flush(); err != nil {
		return fmt.Errorf("while sending commands: %w", err)
	}
	select {
	case p.inflight <- t:
		return nil
	case <-p.failed:
		return p.err
	}
}

// The commands' names in errors.
const (
	verbFunction = "FUNCTION LOAD"
	verbRestore  = "RESTORE"
	verbSet      = "SET"
	verbMSet     = "MSET"
)

// inlineArg is the largest argument send copies into its command buffer.
const inlineArg = 4 << 10

// close ends the pipeline: with ok, after handing over the last batch, sending what is
// buffered and reading every answer; without, at once. It returns the first error of
// sending or of an answer.
func (p *pipeline) close(ok bool) error {
	defer p.stop()
	var err error
	if ok {
		if err = p.handOver(); err == nil {
			err = p.w.Flush()
		} else {
			ok = false
		}
	}
	if !ok || err != nil {
		_ = p.conn.Close()
	}
	close(p.inflight)
	<-p.done
	_ = p.conn.Close()
	if !ok {
		return err
	}
	if err != nil {
		return fmt.Errorf("while sending commands: %w", err)
	}
	return p.err
}

// read reads the answers of each batch taken from inflight, until inflight is closed and
// empty or an answer is an error.
func (p *pipeline) read(r *bufio.Reader) {
	defer close(p.done)
	for t := range p.inflight {
		for j := 0; j < t.n; {
			// Most answers are +OK: those already buffered are skipped together.
			if k := skipOKs(r, t.n-j); k > 0 {
				j += k
				continue
			}
			if err := readReply(r); err != nil {
				i := (t.first + j) % len(p.labels)
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
			j++
		}
	}
}

// okReply is the answer of a SET or a RESTORE that worked.
const okReply = "+OK\r\n"

// skipOKs discards the +OK answers at the start of what r has buffered, at most n of them,
// without reading more, and returns how many it discarded.
func skipOKs(r *bufio.Reader, n int) int {
	buf, _ := r.Peek(min(r.Buffered(), n*len(okReply)))
	k := 0
	for len(buf) >= len(okReply) && string(buf[:len(okReply)]) == okReply {
		buf = buf[len(okReply):]
		k++
	}
	if k > 0 {
		_, _ = r.Discard(k * len(okReply))
	}
	return k
}

// what names command i of the ring.
func (p *pipeline) what(i int) string {
	switch p.verbs[i] {
	case verbFunction:
		return verbFunction + " of a function library"
	case verbMSet:
		return msetLabel(p.labels[i], p.lengths[i])
	}
	if p.lengths[i] > len(p.labels[i]) {
		return fmt.Sprintf("%s of key %q... (%d bytes)", p.verbs[i], p.labels[i], p.lengths[i])
	}
	return fmt.Sprintf("%s of key %q", p.verbs[i], p.labels[i])
}

// msetLabel names an MSET of n keys by the keys its label holds (each a length byte, with
// labelCut when the key was cut, then up to maxMSetLabelKey bytes of the key).
func msetLabel(label []byte, n int) string {
	var b strings.Builder
	if n == 1 {
		b.WriteString("MSET of 1 key")
	} else {
		fmt.Fprintf(&b, "MSET of %d keys", n)
	}
	shown := 0
	for sep := " "; len(label) > 0; sep = ", " {
		size, cut := int(label[0]&^labelCut), label[0]&labelCut != 0
		k := label[1:min(len(label), 1+size)]
		label = label[1+len(k):]
		fmt.Fprintf(&b, "%s%q", sep, k)
		if cut {
			b.WriteString("...")
		}
		shown++
	}
	if shown < n {
		b.WriteString(", ...")
	}
	return b.String()
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
