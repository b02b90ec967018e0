package main

import "os"

func osEnviron() []string { return os.Environ() }
