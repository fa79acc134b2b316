// Command registrar stands in for csi-node-driver-registrar in the node suite (make node-e2e) while ours cannot
// be registered by a real kubelet: the kubelet dials a registration socket with its path as the HTTP/2 :authority
// (pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go, dial), which the h2 crate under tonic
// refuses (RST_STREAM PROTOCOL_ERROR). Test infrastructure only: nothing built here ships.
//
// It does what the kubelet needs of a registrar and nothing more: asks the driver its name (GetPluginInfo), serves
// the plugin registration service (GetInfo, NotifyRegistrationStatus) on <plugin-registration-path>/<driver>-reg.sock,
// answers /healthz on --http-endpoint, and removes its socket on SIGTERM. Flags are upstream's names.
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type server struct {
	registration.UnimplementedRegistrationServer
	name, endpoint string
}

func (s *server) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	log.Printf("GetInfo from the kubelet: %s at %s", s.name, s.endpoint)
	return &registration.PluginInfo{
		Type:              registration.CSIPlugin,
		Name:              s.name,
		Endpoint:          s.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (s *server) NotifyRegistrationStatus(_ context.Context, status *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !status.PluginRegistered {
		log.Fatalf("the kubelet refused the registration: %s", status.Error)
	}
	log.Printf("registered with the kubelet")
	return &registration.RegistrationStatusResponse{}, nil
}

func driverName(address string) string {
	conn, err := grpc.NewClient("unix://"+address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatalf("dialling %s: %v", address, err)
	}
	defer conn.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		cancel()
		if err == nil {
			return info.GetName()
		}
		log.Printf("waiting for the driver at %s: %v", address, err)
		time.Sleep(time.Second)
	}
}

func main() {
	csiAddress := flag.String("csi-address", "/run/csi/socket", "the driver's socket in this container")
	registrationPath := flag.String("kubelet-registration-path", "", "the driver's socket on the node, for the kubelet")
	pluginPath := flag.String("plugin-registration-path", "/registration", "the kubelet's plugin registry directory")
	httpEndpoint := flag.String("http-endpoint", "", "address of /healthz")
	flag.Int("v", 0, "ignored")
	flag.Parse()
	if *registrationPath == "" {
		log.Fatal("--kubelet-registration-path is required")
	}
	name := driverName(*csiAddress)
	socket := filepath.Join(*pluginPath, name+"-reg.sock")
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatalf("listening on %s: %v", socket, err)
	}
	grpcServer := grpc.NewServer()
	registration.RegisterRegistrationServer(grpcServer, &server{name: name, endpoint: *registrationPath})
	if *httpEndpoint != "" {
		go func() {
			http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
				if _, err := os.Stat(socket); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				_, _ = w.Write([]byte("ok"))
			})
			log.Print(http.ListenAndServe(*httpEndpoint, nil))
		}()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		grpcServer.Stop()
		_ = os.Remove(socket)
		os.Exit(0)
	}()
	log.Printf("serving the registration of %s on %s", name, socket)
	if err := grpcServer.Serve(listener); err != nil {
		log.Fatal(err)
	}
}
