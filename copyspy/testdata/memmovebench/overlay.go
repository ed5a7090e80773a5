//go:build copyspy

package main

import _ "unsafe" // for go:linkname

var modes = []string{"off", "on"}

//go:linkname copyspyEnable runtime.copyspyEnable
func copyspyEnable(on bool)

func enable(on bool) { copyspyEnable(on) }
