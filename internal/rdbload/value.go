package rdbload

import "fmt"

// Value types of an RDB (src/rdb.h RDB_TYPE_*), as Redis 7.0 to 7.4 write and read them.
const (
	typeString            = 0
	typeList              = 1
	typeSet               = 2
	typeZSet              = 3
	typeHash              = 4
	typeZSet2             = 5
	typeModulePreGA       = 6
	typeModule2           = 7
	typeHashZipmap        = 9
	typeListZiplist       = 10
	typeSetIntset         = 11
	typeZSetZiplist       = 12
	typeHashZiplist       = 13
	typeListQuicklist     = 14
	typeStreamListpacks   = 15
	typeHashListpack      = 16
	typeZSetListpack      = 17
	typeListQuicklist2    = 18
	typeStreamListpacks2  = 19
	typeSetListpack       = 20
	typeStreamListpacks3  = 21
	typeHashMetadataPreGA = 22
	typeHashListpackExPre = 23
	typeHashMetadata      = 24
	typeHashListpackEx    = 25
)

// streamIDLen is a stream ID in raw form: two big-endian 64-bit numbers.
const streamIDLen = 16

// skipValue consumes the serialized value of type t, which the source records: it reads
// only what it needs to find where the value ends.
func (s *source) skipValue(t byte) error {
	switch t {
	case typeString, typeHashZipmap, typeListZiplist, typeSetIntset, typeZSetZiplist, typeHashZiplist,
		typeHashListpack, typeZSetListpack, typeSetListpack, typeHashListpackExPre:
		// One string: the value, or the ziplist/listpack/intset/zipmap blob.
		return s.skipString()
	case typeHashListpackEx:
		// The smallest field expiry (8-byte milliseconds), then the listpack.
		if err := s.skip(8); err != nil {
			return err
		}
		return s.skipString()
	case typeList, typeSet, typeListQuicklist:
		return s.skipStrings(1)
	case typeHash:
		return s.skipStrings(2)
	case typeZSet:
		return s.skipZSet(false)
	case typeZSet2:
		return s.skipZSet(true)
	case typeListQuicklist2:
		return s.skipQuicklist2()
	case typeHashMetadata, typeHashMetadataPreGA:
		return s.skipHashMetadata(t == typeHashMetadata)
	case typeStreamListpacks, typeStreamListpacks2, typeStreamListpacks3:
		return s.skipStream(t)
	case typeModule2, typeModulePreGA:
		return fmt.Errorf("%w: a module's value (type %d): modules are not supported, load it with the module's own tools", ErrUnsupported, t)
	}
	return fmt.Errorf("%w: value type %d, unknown to Redis 7.0 to 7.4", ErrUnsupported, t)
}

// skipStrings consumes a count of entries, then per entry perEntry strings.
func (s *source) skipStrings(perEntry int64) error {
	n, err := s.count()
	if err != nil {
		return err
	}
	for range n * perEntry {
		if err := s.skipString(); err != nil {
			return err
		}
	}
	return nil
}

// skipZSet consumes a sorted set as a count and member-score pairs: scores as 8-byte
// doubles (binary) or as a length byte and that many decimal characters, 253 to 255 being
// NaN, +inf and -inf with no characters.
func (s *source) skipZSet(binary bool) error {
	n, err := s.count()
	if err != nil {
		return err
	}
	for range n {
		if err := s.skipString(); err != nil {
			return err
		}
		if binary {
			err = s.skip(8)
		} else {
			var l byte
			if l, err = s.byte(); err == nil && l < 253 {
				err = s.skip(int64(l))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Quicklist node containers (src/quicklist.h).
const (
	containerPlain  = 1
	containerPacked = 2
)

// skipQuicklist2 consumes a list as a count of nodes, each a container kind and a string.
func (s *source) skipQuicklist2() error {
	n, err := s.count()
	if err != nil {
		return err
	}
	for range n {
		c, err := s.count()
		if err != nil {
			return err
		}
		if c != containerPlain && c != containerPacked {
			return fmt.Errorf("%w: quicklist container %d", ErrCorrupt, c)
		}
		if err := s.skipString(); err != nil {
			return err
		}
	}
	return nil
}

// skipHashMetadata consumes a hash with field expiries (Redis 7.4): the smallest expiry
// (8-byte milliseconds; not in the 7.4 release candidates' layout), a count, then per field
// its expiry as a length, the field and the value.
func (s *source) skipHashMetadata(minExpire bool) error {
	if minExpire {
		if err := s.skip(8); err != nil {
			return err
		}
	}
	n, err := s.count()
	if err != nil {
		return err
	}
	for range n {
		if _, err := s.count(); err != nil {
			return err
		}
		if err := s.skipString(); err != nil {
			return err
		}
		if err := s.skipString(); err != nil {
			return err
		}
	}
	return nil
}

// skipStream consumes a stream: its listpacks (each a master ID string and a listpack
// string), its length and last ID, from the second layout its first ID, largest deleted ID
// and entries added, then its consumer groups: name, last ID, from the second layout the
// entries read, the group's pending entries (raw ID, 8-byte delivery time, delivery count)
// and its consumers (name, 8-byte seen time, from the third layout an 8-byte active time,
// and their pending IDs, raw).
func (s *source) skipStream(t byte) error {
	if err := s.skipStrings(2); err != nil {
		return err
	}
	counters := 3 // length, last ID
	if t >= typeStreamListpacks2 {
		counters += 5 // first ID, largest deleted ID, entries added
	}
	if err := s.skipCounts(counters); err != nil {
		return err
	}
	groups, err := s.count()
	if err != nil {
		return err
	}
	for range groups {
		if err := s.skipString(); err != nil {
			return err
		}
		counters := 2 // last ID
		if t >= typeStreamListpacks2 {
			counters++ // entries read
		}
		if err := s.skipCounts(counters); err != nil {
			return err
		}
		pending, err := s.count()
		if err != nil {
			return err
		}
		for range pending {
			if err := s.skip(streamIDLen + 8); err != nil {
				return err
			}
			if _, err := s.count(); err != nil {
				return err
			}
		}
		if err := s.skipConsumers(t); err != nil {
			return err
		}
	}
	return nil
}

// skipConsumers consumes the consumers of a stream's consumer group.
func (s *source) skipConsumers(t byte) error {
	consumers, err := s.count()
	if err != nil {
		return err
	}
	times := int64(8) // seen time
	if t >= typeStreamListpacks3 {
		times += 8 // active time
	}
	for range consumers {
		if err := s.skipString(); err != nil {
			return err
		}
		if err := s.skip(times); err != nil {
			return err
		}
		ids, err := s.count()
		if err != nil {
			return err
		}
		if err := s.skip(ids * streamIDLen); err != nil {
			return err
		}
	}
	return nil
}

// skipCounts consumes n lengths.
func (s *source) skipCounts(n int) error {
	for range n {
		if _, err := s.count(); err != nil {
			return err
		}
	}
	return nil
}
