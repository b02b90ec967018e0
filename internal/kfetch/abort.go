package kfetch

import (
	"cmp"
	"slices"
)

// abortedTxn is one aborted transaction a fetch response announced.
type abortedTxn struct {
	producerID  int64
	firstOffset int64
	closed      bool // its ABORT marker has been read
}

// abortedTxns answers, batch by batch in offset order, whether a
// transactional batch belongs to an aborted transaction: it does when its
// producer has an open aborted transaction whose first offset is at or
// below the batch's base offset. Each ABORT marker of that producer closes
// the producer's earliest open one.
//
// The list is sorted by producer, then first offset: the broker need not
// send it so (Redpanda puts its newest in-memory ranges ahead of older
// ones), and with a later transaction taken for the earliest, the records
// of an earlier aborted one would pass as committed. A slice, not a map,
// so that a Result reuses it across fetches.
type abortedTxns []abortedTxn

func (a *abortedTxns) clear() { *a = (*a)[:0] }

func (a *abortedTxns) add(producerID, firstOffset int64) {
	*a = append(*a, abortedTxn{producerID: producerID, firstOffset: firstOffset})
}

// sort readies the list for aborted and closeAt, once every transaction of
// the answer is added.
func (a abortedTxns) sort() {
	slices.SortFunc(a, func(x, y abortedTxn) int {
		return cmp.Or(cmp.Compare(x.producerID, y.producerID), cmp.Compare(x.firstOffset, y.firstOffset))
	})
}

// open returns the index of the producer's earliest aborted transaction not
// yet closed by its marker, or -1.
func (a abortedTxns) open(producerID int64) int {
	i, _ := slices.BinarySearchFunc(a, producerID, func(t abortedTxn, id int64) int {
		return cmp.Compare(t.producerID, id)
	})
	for ; i < len(a) && a[i].producerID == producerID; i++ {
		if !a[i].closed {
			return i
		}
	}
	return -1
}

// aborted reports whether a transactional batch of producerID starting at
// baseOffset belongs to an aborted transaction.
func (a abortedTxns) aborted(producerID, baseOffset int64) bool {
	if len(a) == 0 {
		return false
	}
	i := a.open(producerID)
	return i >= 0 && a[i].firstOffset <= baseOffset
}

// closeAt applies an ABORT marker of producerID at offset: it ends the
// producer's earliest open aborted transaction if that began before it.
func (a abortedTxns) closeAt(producerID, offset int64) {
	if len(a) == 0 {
		return
	}
	if i := a.open(producerID); i >= 0 && a[i].firstOffset <= offset {
		a[i].closed = true
	}
}
