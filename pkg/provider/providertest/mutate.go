package providertest

import "math/rand"

// Mutate returns a copy of one of seeds with 1 to 5 random edits (a byte
// replaced, a byte dropped, the body cut short, or a random span of it
// repeated), for deterministic mutation tests next to Go's fuzzing.
func Mutate(r *rand.Rand, seeds [][]byte) []byte {
	b := append([]byte(nil), seeds[r.Intn(len(seeds))]...)
	for k := 1 + r.Intn(5); k > 0 && len(b) > 1; k-- {
		switch r.Intn(4) {
		case 0:
			b[r.Intn(len(b))] = byte(r.Intn(256))
		case 1:
			j := r.Intn(len(b))
			b = append(b[:j], b[j+1:]...)
		case 2:
			b = b[:1+r.Intn(len(b))]
		case 3:
			i := r.Intn(len(b))
			j := i + r.Intn(min(len(b)-i, 200))
			b = append(b[:j], append(append([]byte(nil), b[i:j]...), b[j:]...)...)
		}
	}
	return b
}
