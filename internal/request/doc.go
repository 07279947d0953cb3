// Package request holds what every handler needs to read a request and
// write an answer the way kube-apiserver does.
//
//   - Parse turns a method and path into an Info (group, version,
//     namespace, resource, name, subresource, verb).
//   - Negotiate picks the response representation from Accept (JSON, YAML,
//     and transformations such as Table) or fails with 406.
//   - ReadBody, ToJSON and DecodeObject read bodies (JSON or YAML, at most
//     3 MiB) with Kubernetes' 400, 413 and 415 errors.
//   - WriteError sends any error as a metav1.Status; Write and WriteObject
//     send bodies; AddWarning adds a "299" Warning header.
package request
