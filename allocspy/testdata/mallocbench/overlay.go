//go:build allocspy

package main

import _ "unsafe" // for go:linkname

var modes = []string{"off", "on"}

//go:linkname allocspyEnable runtime.allocspyEnable
func allocspyEnable(on bool)

func enable(on bool) { allocspyEnable(on) }
