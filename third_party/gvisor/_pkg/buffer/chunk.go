// Copyright 2022 The gVisor Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Modified by netjam (third_party/gvisor/patches/0009): a pooled chunk is
// not cleared when it is taken; the bytes a view exposes unwritten are
// (View.Grow), so a chunk about to be written over is not cleared first.
//
// Modified by netjam (third_party/gvisor/patches/0010): a chunk may hold
// bytes its owner lends (NewViewOf), given back when it is destroyed.

package buffer

import (
	"fmt"

	"github.com/netjam/netjam/third_party/gvisor/_pkg/bits"
	"github.com/netjam/netjam/third_party/gvisor/_pkg/sync"
)

const (
	// This is log2(baseChunkSize). This number is used to calculate which pool
	// to use for a payload size by right shifting the payload size by this
	// number and passing the result to MostSignificantOne64.
	baseChunkSizeLog2 = 6

	// This is the size of the buffers in the first pool. Each subsequent pool
	// creates payloads 2^(pool index) times larger than the first pool's
	// payloads.
	baseChunkSize = 1 << baseChunkSizeLog2 // 64

	// MaxChunkSize is largest payload size that we pool. Payloads larger than
	// this will be allocated from the heap and garbage collected as normal.
	MaxChunkSize = baseChunkSize << (numPools - 1) // 64k

	// The number of chunk pools we have for use.
	numPools = 11
)

// chunkPools is a collection of pools for payloads of different sizes. The
// size of the payloads doubles in each successive pool.
var chunkPools [numPools]sync.Pool

func init() {
	for i := 0; i < numPools; i++ {
		chunkSize := baseChunkSize * (1 << i)
		chunkPools[i].New = func() any {
			return &chunk{
				data: make([]byte, chunkSize),
			}
		}
	}
}

// Precondition: 0 <= size <= maxChunkSize
func getChunkPool(size int) *sync.Pool {
	idx := 0
	if size > baseChunkSize {
		idx = bits.MostSignificantOne64(uint64(size) >> baseChunkSizeLog2)
		if size > 1<<(idx+baseChunkSizeLog2) {
			idx++
		}
	}
	if idx >= numPools {
		panic(fmt.Sprintf("pool for chunk size %d does not exist", size))
	}
	return &chunkPools[idx]
}

// Chunk represents a slice of pooled memory.
//
// +stateify savable
type chunk struct {
	chunkRefs
	data []byte
	// owner, when set, owns data (NewViewOf): the chunk is not pooled,
	// and owner.Release is called once the last view of it is released.
	owner Releaser `state:"nosave"`
}

// Releaser owns the bytes of a view made by NewViewOf.
type Releaser interface {
	// Release is called once, when no view of the bytes remains.
	Release()
}

// ownedChunks holds chunks for NewViewOf, without data.
var ownedChunks = sync.Pool{New: func() any { return &chunk{} }}

func newChunk(size int) *chunk {
	var c *chunk
	if size > MaxChunkSize {
		c = &chunk{
			data: make([]byte, size),
		}
	} else {
		// A pooled chunk holds what its last user wrote. It is not
		// cleared here: a view shows only the bytes written to it, and
		// Grow clears those it adds unwritten, so that a chunk about to
		// be written over (NewViewWithData, a read into a new view) is
		// not cleared first.
		pool := getChunkPool(size)
		c = pool.Get().(*chunk)
	}
	c.InitRefs()
	return c
}

func (c *chunk) destroy() {
	if o := c.owner; o != nil {
		c.owner, c.data = nil, nil
		ownedChunks.Put(c)
		o.Release()
		return
	}
	if len(c.data) > MaxChunkSize {
		c.data = nil
		return
	}
	pool := getChunkPool(len(c.data))
	pool.Put(c)
}

func (c *chunk) DecRef() {
	c.chunkRefs.DecRef(c.destroy)
}

func (c *chunk) Clone() *chunk {
	cpy := newChunk(len(c.data))
	copy(cpy.data, c.data)
	return cpy
}
