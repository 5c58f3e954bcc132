package main

// The command reaches nodes of a managed Kubernetes (inventory's
// kubernetes:): it links the transport that package remote leaves to
// remote/kube, so that no other binary linking remote carries client-go.
import _ "gpuaccept/remote/kube"
