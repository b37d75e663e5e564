//go:build !linux

package hugepage

// heapState does nothing where the kernel has no transparent huge pages to ask for.
type heapState struct{}

func (h *heapState) pass(<-chan struct{}, bool) {}
func (h *heapState) stats() Stats               { return Stats{} }
