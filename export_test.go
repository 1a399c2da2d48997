package azsessions

// InProcessTransport is inProcessTransport for the external test package.
var InProcessTransport = inProcessTransport
