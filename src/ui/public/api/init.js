// The API reference, from the daemon's own OpenAPI document. "Try it out" sends the
// secret from this tab's sign-in as a header, never in the URL.
window.SwaggerUIBundle({
  url: '/v1/openapi.json',
  dom_id: '#swagger',
  deepLinking: true,
  requestInterceptor: (req) => {
    const secret = sessionStorage.getItem('watchword.secret');
    if (secret) req.headers['X-Service-Token'] = secret;
    return req;
  },
});
