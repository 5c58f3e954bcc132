package main

import (
	"fmt"

	"gpuaccept/orchestrator/inventory"
)

func main() {
	for _, k := range inventory.EnvKeys() {
		fmt.Println(inventory.EnvVar(k), k)
	}
}
