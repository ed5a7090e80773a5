module example.com/oldmods

go 1.22

require (
	golang.org/x/net v0.20.0
	golang.org/x/sys v0.16.0
)

require golang.org/x/text v0.14.0 // indirect
