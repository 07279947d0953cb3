// Package crontab is the conversion of the CronTab kind of the Kubernetes
// documentation between its two versions, through a hub: v1beta1 has one
// field hostPort ("host:port"), v1 has host and port.
package crontab

import (
	"fmt"
	"net"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/conversion/webhook"
)

// Group is the API group of the example's CronTabs.
const Group = "example.com"

// Spec is the part both versions share.
type Spec struct {
	CronSpec string `json:"cronSpec,omitempty"`
	Image    string `json:"image,omitempty"`
	Replicas *int64 `json:"replicas,omitempty"`
}

// Hub is the in-memory CronTab every version converts through.
type Hub struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              *Spec
	Host, Port        string
}

// V1beta1 is example.com/v1beta1 CronTab.
type V1beta1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              *Spec  `json:"spec,omitempty"`
	HostPort          string `json:"hostPort,omitempty"`
}

// V1 is example.com/v1 CronTab.
type V1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              *Spec  `json:"spec,omitempty"`
	Host              string `json:"host,omitempty"`
	Port              string `json:"port,omitempty"`
}

// NewScheme returns the conversion webhook of CronTab: serve it.
func NewScheme() *webhook.Scheme[Hub] {
	s := webhook.NewScheme[Hub]()
	webhook.AddVersion(s, Group+"/v1beta1", v1beta1ToHub, v1beta1FromHub)
	webhook.AddVersion(s, Group+"/v1", v1ToHub, v1FromHub)
	return s
}

func v1beta1ToHub(v *V1beta1) (*Hub, error) {
	h := &Hub{ObjectMeta: v.ObjectMeta, Spec: v.Spec}
	if v.HostPort != "" {
		host, port, err := net.SplitHostPort(v.HostPort)
		if err != nil {
			return nil, fmt.Errorf("hostPort %q is not host:port", v.HostPort)
		}
		h.Host, h.Port = host, port
	}
	return h, nil
}

func v1beta1FromHub(h *Hub) (*V1beta1, error) {
	v := &V1beta1{ObjectMeta: h.ObjectMeta, Spec: h.Spec}
	if h.Host != "" || h.Port != "" {
		v.HostPort = net.JoinHostPort(h.Host, h.Port)
	}
	return v, nil
}

func v1ToHub(v *V1) (*Hub, error) {
	return &Hub{ObjectMeta: v.ObjectMeta, Spec: v.Spec, Host: v.Host, Port: v.Port}, nil
}

func v1FromHub(h *Hub) (*V1, error) {
	return &V1{ObjectMeta: h.ObjectMeta, Spec: h.Spec, Host: h.Host, Port: h.Port}, nil
}
