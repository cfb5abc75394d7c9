/* cs-layout-private.h: render/-internal layout entry points (not for app/). */
#pragma once

#include "cs-layout.h"

G_BEGIN_DECLS

void _cs_layout_run_layered (CsLayout *layout);

G_END_DECLS
