package auth

import (
	"context"
	"os"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
	"k8s.io/apiserver/pkg/util/filesystem"
)

// updateTimeout bounds how long a new configuration's issuers may take to
// become reachable before it is given up (and tried again), as
// kube-apiserver's.
const updateTimeout = time.Minute

// watchAuthenticationConfig reloads the configuration file when it
// changes (a file system notification, or every interval) until ctx ends,
// as kube-apiserver does: a file that cannot be read is tried again; one
// that does not decode or validate, or changes the anonymous section, is
// logged and kept out until the file changes again; one whose issuers
// cannot be reached in time is tried again. Meanwhile the old
// configuration stays.
func watchAuthenticationConfig(ctx context.Context, o JWTOptions, jwt *reloadableJWT) {
	interval := o.ReloadInterval
	if interval <= 0 {
		interval = time.Minute
	}
	log := jwt.log
	tracked := o.Data
	anonymous := o.Config.DeepCopy().Anonymous
	var mu sync.Mutex
	filesystem.WatchUntil(ctx, interval, o.File, func() {
		mu.Lock()
		defer mu.Unlock()
		data, err := os.ReadFile(o.File)
		if err != nil {
			log.Error("failed to read authentication config file", "err", err)
			return
		}
		if string(data) == tracked {
			return
		}
		c, err := decodeAuthenticationConfig(data)
		if err != nil {
			log.Error("failed to load authentication config", "err", err)
			tracked = string(data)
			return
		}
		errs := apiservervalidation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), c, o.DisallowedIssuers)
		if !reflect.DeepEqual(anonymous, c.Anonymous) {
			errs = append(errs, field.Forbidden(field.NewPath("anonymous"), "changed from initial configuration file"))
		}
		if err := errs.ToAggregate(); err != nil {
			log.Error("failed to validate authentication config", "err", err)
			tracked = string(data)
			return
		}
		uctx, cancel := context.WithTimeout(ctx, updateTimeout)
		defer cancel()
		if err := jwt.update(uctx, c); err != nil {
			log.Error("failed to update authentication config", "err", err)
			return
		}
		tracked = string(data)
		log.Info("reloaded authentication config")
	}, func(err error) { log.Error("watching authentication config file", "err", err) })
}
