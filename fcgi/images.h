/* images.h: image catalog lookups for the api. */
#ifndef SANDBOX_API_IMAGES_H
#define SANDBOX_API_IMAGES_H

#include "request.h"

/* [{name, digest, packages, aliases:[...]}], NULL on a database error. */
struct json_object *images_list(struct request *r);
/* Resolve a base_image (name, alias, optionally @sha256:...) to the
 * catalog name and digest. -1 after having answered (400 naming the image
 * and listing the available ones, or 503). */
int image_resolve(struct request *r, const char *requested, char name[65],
		  char digest[80]);

#endif
