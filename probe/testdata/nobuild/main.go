// This package does not compile on purpose: probe must report the build error.
package main

func main() {
	undefinedFunction()
}
