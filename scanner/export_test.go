package scanner

import "context"

// What the external tests call that no other package does.

func (g *Gate) Refresh(ctx context.Context) error { return g.refresh(ctx) }

func (g *Gate) OnAdvance(fn func(wm int64)) { g.onAdvance(fn) }

func (s *Scanner) Wake(id int) bool { return s.wake(id) }
