package handlers

import "testing"

// addObjects creates one object of each kind in program A (f.ids) and in
// program B (f.idsB), for routes with object ids.
func (f *matrixFixture) addObjects(t *testing.T) {
	t.Helper()
}
