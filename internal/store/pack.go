package store

import (
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A cache holds every object it mirrors, as encoded: the CRDs of a
// provider are 30-400 KiB each, mostly schema text that compresses ten
// times. Items of at least packAbove bytes are kept compressed (zstd, the
// fastest level) and uncompressed on each read (about a gigabyte a
// second), so that what nobody reads costs a tenth of its size.

// packAbove is the size from which an item is kept compressed.
const packAbove = 16 << 10

var (
	packer   *zstd.Encoder
	unpacker *zstd.Decoder
	packOnce sync.Once
)

func codecs() (*zstd.Encoder, *zstd.Decoder) {
	packOnce.Do(func() {
		var err error
		// A window of 256 KiB: the encoder's state is a few times its
		// window, held for the life of the process.
		if packer, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(256<<10)); err != nil {
			panic(err)
		}
		if unpacker, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderLowmem(true)); err != nil {
			panic(err)
		}
	})
	return packer, unpacker
}

// pack keeps a large item compressed, if that makes it smaller.
func (it *Item) pack() {
	if len(it.Raw) < packAbove {
		return
	}
	enc, _ := codecs()
	packed := enc.EncodeAll(it.Raw, make([]byte, 0, len(it.Raw)/4))
	if len(packed) >= len(it.Raw) {
		return
	}
	it.packed, it.size, it.Raw = packed, len(it.Raw), nil
}

// Bytes returns the stored JSON with metadata.resourceVersion set to Rev
// (Raw, or the packed item uncompressed: a new slice each call).
func (it *Item) Bytes() []byte {
	if it.packed == nil {
		return it.Raw
	}
	_, dec := codecs()
	raw, err := dec.DecodeAll(it.packed, make([]byte, 0, it.size))
	if err != nil {
		// Only this process packs, from bytes it holds: cannot happen.
		panic("store: a packed item does not unpack: " + err.Error())
	}
	return raw
}

// Size is the length of Bytes, without unpacking.
func (it *Item) Size() int {
	if it.packed == nil {
		return len(it.Raw)
	}
	return it.size
}
