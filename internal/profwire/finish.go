package profwire

// finish checks what profile.Parse checks and resolves the ids: the
// string indexes in range, no id 0 or twice, every line's function and
// every sample's location known, the value counts those of the sample
// types.
func (d *decoder) finish() error {
	p := d.p
	ns := int64(len(p.strs))
	str := func(i int64) (string, error) {
		if i < 0 || i >= ns {
			return "", malformed("string %d of %d", i, ns)
		}
		return p.str(i), nil
	}
	for _, i := range d.strIdx {
		if _, err := str(i); err != nil {
			return err
		}
	}
	for _, i := range p.fnName {
		if _, err := str(i); err != nil {
			return err
		}
	}
	for _, vt := range d.types {
		t, err := str(vt[0])
		if err != nil {
			return err
		}
		u, err := str(vt[1])
		if err != nil {
			return err
		}
		p.Types = append(p.Types, ValueType{t, u})
	}
	var err error
	if p.DefaultType, err = str(d.deflt); err != nil {
		return err
	}
	for _, c := range d.comments {
		s, err := str(c)
		if err != nil {
			return err
		}
		p.Comments = append(p.Comments, s)
	}
	if p.Samples > 0 && len(p.Types) == 0 {
		return malformed("missing sample type information")
	}
	if p.Samples > 0 && d.nv != len(p.Types) {
		return malformed("mismatch: sample has %d values vs. %d types", d.nv, len(p.Types))
	}
	if p.Samples == 0 {
		p.nt = len(p.Types)
		p.Negative = make([]bool, p.nt)
		p.Overflow = make([]bool, p.nt)
	}
	if _, err := newIDs(d.mapIDs, "mapping"); err != nil {
		return err
	}
	fns, err := newIDs(d.fnIDs, "function")
	if err != nil {
		return err
	}
	locs, err := newIDs(d.locIDs, "location")
	if err != nil {
		return err
	}
	if err := d.lines(fns); err != nil {
		return err
	}
	return d.stacks(locs)
}

// lines resolves the lines' function ids.
func (d *decoder) lines(fns *ids) error {
	p := d.p
	for i, id32 := range p.lineFn {
		id := uint64(id32)
		if big, ok := d.bigFn[i]; ok {
			id = big
		}
		f, ok := fns.index(id)
		if !ok {
			return malformed("a location has a line with no function (id %d)", id)
		}
		p.lineFn[i] = f
	}
	return nil
}

// presize counts the tables' rows in a quick pass over the top-level
// fields, so that each is made once at its size: a big profile's tables
// are then neither copied as they grow nor left behind as garbage.
func (d *decoder) presize(b []byte) {
	var locs, lines, fns, strs int
	for len(b) > 0 {
		num, typ, v, _, rest, err := field(b)
		if err != nil {
			break // Decode says what is wrong
		}
		b = rest
		switch {
		case num == 4 && typ == bytesType:
			locs++
			for len(v) > 0 {
				n, t, _, _, r, err := field(v)
				if err != nil {
					break
				}
				if n == 4 && t == bytesType {
					lines++
				}
				v = r
			}
		case num == 5:
			fns++
		case num == 6:
			strs++
		}
	}
	p := d.p
	p.lineOff = make([]int32, 1, locs+1)
	p.lineFn, p.lineNo = make([]int32, 0, lines), make([]int32, 0, lines)
	p.fnName, p.strs = make([]int64, 0, fns), make([]span, 0, strs)
	d.locIDs, d.fnIDs = make([]uint64, 0, locs), make([]uint64, 0, fns)
}

// stacks checks that every stack's location ids are known.
func (d *decoder) stacks(locs *ids) error {
	p := d.p
	p.locIndex = locs
	for s := range p.keyOff {
		k := p.key(int32(s))
		for len(k) > 0 {
			id, n := uvarint(k)
			if n <= 0 {
				return malformed("bad varint")
			}
			k = k[n:]
			if _, ok := locs.index(id); !ok {
				return malformed("a sample has location %d, which the profile does not have", id)
			}
		}
	}
	d.table.slots = nil
	return nil
}

// ids maps a table's ids to indexes: a slice when they are dense (as
// every encoder writes them), else a map.
type ids struct {
	dense []int32 // id -> index + 1
	m     map[uint64]int32
}

func newIDs(list []uint64, what string) (*ids, error) {
	t := &ids{}
	max := uint64(0)
	for _, id := range list {
		if id > max {
			max = id
		}
	}
	if max <= uint64(2*len(list)+1024) {
		t.dense = make([]int32, max+1)
	} else {
		t.m = make(map[uint64]int32, len(list))
	}
	for i, id := range list {
		if id == 0 {
			return nil, malformed("found %s with reserved id=0", what)
		}
		if _, dup := t.index(id); dup {
			return nil, malformed("multiple %ss with same id: %d", what, id)
		}
		if t.dense != nil {
			t.dense[id] = int32(i + 1)
		} else {
			t.m[id] = int32(i)
		}
	}
	return t, nil
}

func (t *ids) index(id uint64) (int32, bool) {
	if t.dense != nil {
		if id < uint64(len(t.dense)) && t.dense[id] != 0 {
			return t.dense[id] - 1, true
		}
		return 0, false
	}
	i, ok := t.m[id]
	return i, ok
}
