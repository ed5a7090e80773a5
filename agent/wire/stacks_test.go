package wire

import "testing"

func TestGoDeferWrapper(t *testing.T) {
	for name, want := range map[string]bool{
		"main.f.gowrap1": true, "main.f.deferwrap12": true, "pkg.(*T).m.gowrap3": true, "main.f.func1.deferwrap1": true,
		"main.gowrap": false, "main.f.gowrap1x": false, "main.xgowrap1": false, "main.f.func1": false, "": false, "7": false,
	} {
		if got := goDeferWrapper(name); got != want {
			t.Errorf("goDeferWrapper(%q) = %v, want %v", name, got, want)
		}
	}
}
