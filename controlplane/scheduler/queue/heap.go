package queue

import "container/heap"

// podHeap is a heap of queued pods ordered by less; each item remembers
// its index so it can be removed or fixed in O(log n).
type podHeap struct {
	items []*QueuedPod
	less  func(a, b *QueuedPod) bool
}

func (h *podHeap) Len() int           { return len(h.items) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *podHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = i
	h.items[j].index = j
}
func (h *podHeap) Push(x any) {
	p := x.(*QueuedPod)
	p.index = len(h.items)
	h.items = append(h.items, p)
}
func (h *podHeap) Pop() any {
	last := len(h.items) - 1
	p := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	p.index = -1
	return p
}

func (h *podHeap) push(p *QueuedPod) { heap.Push(h, p) }
func (h *podHeap) pop() *QueuedPod   { return heap.Pop(h).(*QueuedPod) }
func (h *podHeap) peek() *QueuedPod {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}
func (h *podHeap) remove(p *QueuedPod) { heap.Remove(h, p.index) }
func (h *podHeap) fix(p *QueuedPod)    { heap.Fix(h, p.index) }
