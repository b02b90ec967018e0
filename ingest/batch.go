package ingest

import (
	"context"
	"time"
)

// batcher gathers fetched chunks into batches of at most batch_size
// records, prepares each with a free processor and hands it to the writer,
// in order.
func (in *Ingest) batcher(ctx context.Context, chunks <-chan chunk, free chan *processor, prepared chan<- *processor) {
	size := in.cfg.BatchSize
	var buf []chunk
	var carry []chunk // the rest of a chunk split at a batch's end
	// n counts the records in buf.
	n := 0
	add := func(c chunk) {
		buf = append(buf, c)
		n += len(c.msgs)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		buf, n = buf[:0], 0
		for _, c := range carry {
			add(c)
		}
		carry = carry[:0]
		if n == 0 {
			select {
			case <-ctx.Done():
				return
			case c := <-chunks:
				add(c)
			}
		}
		if in.cfg.BatchWait > 0 {
			timer.Reset(in.cfg.BatchWait)
		fill:
			for n < size {
				select {
				case c := <-chunks:
					add(c)
				case <-timer.C:
					break fill
				case <-ctx.Done():
					return
				}
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		// Take what is already queued without waiting longer.
	more:
		for n < size {
			select {
			case c := <-chunks:
				add(c)
			default:
				break more
			}
		}
		if n > size {
			// Split the last chunk: its tail starts the next batch.
			last := &buf[len(buf)-1]
			keep := len(last.msgs) - (n - size)
			tail := *last // with its next: what the fetch skipped follows the tail
			tail.msgs = last.msgs[keep:]
			carry = append(carry, tail)
			last.msgs = last.msgs[:keep:keep]
			last.next = tail.msgs[0].Offset
			tail.slab.share()
		}
		var p *processor
		select {
		case p = <-free:
		case <-ctx.Done():
			return
		}
		p.prepare(buf)
		for _, c := range buf {
			c.slab.release()
		}
		clear(buf)
		select {
		case prepared <- p:
		case <-ctx.Done():
			return
		}
	}
}
