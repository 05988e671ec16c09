package weigher

import (
	"bufio"
	"encoding/binary"
	"io"
)

// gifSize reads the size of a GIF (GIF87a or GIF89a,
// https://www.w3.org/Graphics/GIF/spec-gif89a.txt) from r, which starts at
// its signature, as Pillow sizes it: the logical screen, grown to the
// extent (left + width, top + height) of the first image descriptor where
// that is larger (GifImagePlugin: "if x1 > self.size[0] or y1 >
// self.size[1]"), so that a large frame on a small screen weighs as the
// image the upstream sees. It steps over the colour table and the
// extensions before the first image, reading no further than that
// descriptor; a file that ends before it has its screen's size. ok is
// false when r holds no GIF header.
func gifSize(r io.Reader) (width, height int64, ok bool) {
	br := bufio.NewReaderSize(r, 512)
	var hdr [13]byte // signature, version, logical screen descriptor
	if _, err := io.ReadFull(br, hdr[:]); err != nil || string(hdr[:4]) != "GIF8" {
		return 0, 0, false
	}
	width = int64(binary.LittleEndian.Uint16(hdr[6:8]))
	height = int64(binary.LittleEndian.Uint16(hdr[8:10]))
	if packed := hdr[10]; packed&0x80 != 0 { // a global colour table follows
		if _, err := br.Discard(3 << (packed&7 + 1)); err != nil {
			return width, height, true
		}
	}
	for {
		b, err := br.ReadByte()
		if err != nil {
			return width, height, true
		}
		switch b {
		case 0x21: // extension: a label, then sub-blocks up to an empty one
			if _, err := br.ReadByte(); err != nil {
				return width, height, true
			}
			for {
				size, err := br.ReadByte()
				if err != nil {
					return width, height, true
				}
				if size == 0 {
					break
				}
				if _, err := br.Discard(int(size)); err != nil {
					return width, height, true
				}
			}
		case 0x2c: // image descriptor: left, top, width, height
			var d [8]byte
			if _, err := io.ReadFull(br, d[:]); err != nil {
				return width, height, true
			}
			x1 := int64(binary.LittleEndian.Uint16(d[0:2])) + int64(binary.LittleEndian.Uint16(d[4:6]))
			y1 := int64(binary.LittleEndian.Uint16(d[2:4])) + int64(binary.LittleEndian.Uint16(d[6:8]))
			return max(width, x1), max(height, y1), true
		default: // the trailer, or a byte no GIF holds here
			return width, height, true
		}
	}
}
