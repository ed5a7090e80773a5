//go:build !routes

package main

func setup() string { return "plain" }

func runOn(int) {}
