module example.com/othermod

go 1.26
