// Starts Swagger UI on /docs. A file rather than an inline script, so the page keeps
// the content-security policy that allows this origin's scripts only.
"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null,  // no badge from validator.swagger.io: nothing leaves this origin
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
