package scanner

import (
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

func TestAbsentFamilyKeysAreSkippedOnlyWhileSurelyAbsent(t *testing.T) {
	all := shard.KinKeys{Parents: true, Gateways: true, Holds: true}
	none := shard.KinKeys{}
	l := shard.Layout{Count: 4, Epoch: 7}
	const now = int64(1_000_000)

	var a absentKin
	read, tk := a.toRead(l, now)
	if read != all {
		t.Fatalf("nothing known yet: read %+v, want every key", read)
	}
	a.found(none, tk)
	if read, _ = a.toRead(l, now+kinlessFor.Milliseconds()-1); read != none {
		t.Errorf("within kinlessFor of finding none: read %+v, want nothing", read)
	}
	if read, _ = a.toRead(l, now+kinlessFor.Milliseconds()); read != all {
		t.Errorf("kinlessFor after: read %+v, want every key again", read)
	}
	if read, _ = a.toRead(shard.Layout{Count: 8, Previous: 4, Epoch: 8}, now+1); read != all {
		t.Errorf("while the layout migrates: read %+v, want every key", read)
	}
	if read, _ = a.toRead(shard.Layout{Count: 8, Epoch: 9}, now+1); read != all {
		t.Errorf("under a new layout: read %+v, want every key", read)
	}

	// A hold write under way when the read began: its absence is not
	// remembered, the other keys' are.
	var b absentKin
	done := b.writingHolds()
	_, tk = b.toRead(l, now)
	done()
	b.found(none, tk)
	if read, _ = b.toRead(l, now+1); read != (shard.KinKeys{Holds: true}) {
		t.Errorf("a hold write under way at the read: read %+v, want holds only", read)
	}

	// A hold write begun after the read began, done before it ended.
	var c absentKin
	_, tk = c.toRead(l, now)
	c.writingHolds()()
	c.found(none, tk)
	if read, _ = c.toRead(l, now+1); read != (shard.KinKeys{Holds: true}) {
		t.Errorf("a hold write begun during the read: read %+v, want holds only", read)
	}

	// A hold write after the absence was remembered ends it at once.
	var d absentKin
	_, tk = d.toRead(l, now)
	d.found(none, tk)
	d.writingHolds()()
	if read, _ = d.toRead(l, now+1); read != (shard.KinKeys{Holds: true}) {
		t.Errorf("after a hold write: read %+v, want holds only", read)
	}

	// Keys found present are read.
	var e absentKin
	_, tk = e.toRead(l, now)
	e.found(shard.KinKeys{Parents: true}, tk)
	if read, _ = e.toRead(l, now+1); read != (shard.KinKeys{Parents: true}) {
		t.Errorf("parents present: read %+v, want parents only", read)
	}
}
