package csidriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// ServeRegistration serves kubelet's plugin registration API on socket (a
// path in kubelet's plugins_registry folder) until ctx is done: kubelet's
// plugin watcher finds the socket, asks GetInfo, and from then on calls the
// driver's node service on endpoint (the driver's own CSI socket). It is
// what node-driver-registrar does for a real driver, which the local node
// has no image of. The socket is removed on return.
func (d *Driver) ServeRegistration(ctx context.Context, socket, endpoint string) error {
	_ = os.Remove(socket) // a socket left by a killed driver
	lis, err := Listen("unix://" + socket)
	if err != nil {
		return err
	}
	r := &registrar{d: d, endpoint: strings.TrimPrefix(endpoint, "unix://")}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("csidriver: registration: %w", err)
	case <-ctx.Done():
	}
	srv.Stop()
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("csidriver: registration: %w", err)
	}
	return nil
}

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	d        *Driver
	endpoint string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.d.name, Endpoint: r.endpoint,
		SupportedVersions: []string{"1.0.0"}}, nil
}

// NotifyRegistrationStatus logs kubelet's answer.
func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if r.d.logger != nil {
		r.d.logger.Printf("kubelet registration: registered=%v %s", s.PluginRegistered, s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
