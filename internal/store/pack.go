package store

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// A cache holds every object it mirrors, as encoded. Two kinds of items
// are kept compressed, and uncompressed on each read:
//
//   - Items of at least packAbove bytes (a provider's CRDs are 30-400 KiB
//     each, mostly schema text that compresses ten times): zstd, the
//     fastest level (about a gigabyte a second back).
//   - Once a cache holds dictAfter objects, the rest are compressed with a
//     dictionary made from its own objects (S2, klauspost/compress): a
//     resource's objects share their keys, their managers, most of their
//     values, and a 1.6 KiB object keeps about a third of its size,
//     uncompressed again at one or two gigabytes a second. When: cold.go
//     (all it loads; what it takes in while no client lists it; the rest
//     by a sweep once clients stop listing it).

// packAbove is the size from which an item is kept compressed by zstd.
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

// pack keeps the item compressed if it is large (zstd), or, with d, if
// that makes it smaller (d's S2 dictionary). The item must not be shared
// yet.
func (it *Item) pack(d *s2.Dict) {
	switch {
	case len(it.Raw) >= packAbove:
		enc, _ := codecs()
		packed := binary.LittleEndian.AppendUint32(make([]byte, 0, len(it.Raw)/4), uint32(len(it.Raw)))
		packed = enc.EncodeAll(it.Raw, packed)
		if len(packed) < len(it.Raw) {
			it.packed, it.Raw = packed, nil
		}
	case d != nil && len(it.Raw) > 0:
		packed := d.EncodeBetter(nil, it.Raw)
		if len(packed) < len(it.Raw)*7/8 {
			// Its own array, of its size: EncodeBetter's is the largest
			// the encoding can take.
			it.packed, it.dict, it.Raw = append([]byte(nil), packed...), d, nil
		}
	}
}

// Bytes returns the stored JSON with metadata.resourceVersion set to Rev
// (Raw, or the packed item uncompressed: a new slice each call).
func (it *Item) Bytes() []byte {
	if it.packed == nil {
		return it.Raw
	}
	return it.unpack(nil)
}

// AppendBytes appends Bytes to dst, without the copy Bytes makes of a
// packed item.
func (it *Item) AppendBytes(dst []byte) []byte {
	if it.packed == nil {
		return append(dst, it.Raw...)
	}
	n := len(dst)
	dst = append(dst, make([]byte, it.Size())...)
	it.unpack(dst[n:n:len(dst)])
	return dst
}

// unpack uncompresses a packed item into dst (which it allocates if dst
// is too small).
func (it *Item) unpack(dst []byte) []byte {
	var raw []byte
	var err error
	if it.dict != nil {
		raw, err = it.dict.Decode(dst[:cap(dst)], it.packed)
	} else {
		_, dec := codecs()
		if dst == nil {
			dst = make([]byte, 0, it.Size())
		}
		raw, err = dec.DecodeAll(it.packed[4:], dst[:0])
	}
	if err != nil {
		// Only this process packs, from bytes it holds: cannot happen.
		panic("store: a packed item does not unpack: " + err.Error())
	}
	return raw
}

// Size is the length of Bytes, without unpacking.
func (it *Item) Size() int {
	switch {
	case it.packed == nil:
		return len(it.Raw)
	case it.dict != nil:
		n, _ := binary.Uvarint(it.packed)
		return int(n)
	}
	return int(binary.LittleEndian.Uint32(it.packed))
}

// Packed reports whether the item is kept compressed.
func (it *Item) Packed() bool { return it.packed != nil }
