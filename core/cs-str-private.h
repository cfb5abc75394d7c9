/* cs-str-private.h: appending to a GString with the common case inline.  Internal to core/.
 *
 * GLib 2.74 (Debian 12) has no inline g_string_append_len(); the printers append a few bytes
 * at a time, millions of times for a large trace, so the bytes are copied in place when the
 * string has room and GLib is called only to grow it.
 */
#pragma once

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

/* g_string_append_len (@s, @p, @n): @n bytes of @p (no NUL needed) at the end of @s. */
static inline void
_cs_str_put_len (GString *s, const char *p, gsize n)
{
  if (G_LIKELY (s->len + n < s->allocated_len))
    {
      memcpy (s->str + s->len, p, n);
      s->len += n;
      s->str[s->len] = '\0';
    }
  else
    g_string_append_len (s, p, (gssize) n);
}

/* g_string_append (@s, @p): the NUL-terminated @p at the end of @s; NULL appends nothing (as
 * g_string_append() does). */
static inline void
_cs_str_put (GString *s, const char *p)
{
  if (G_LIKELY (p != NULL))
    _cs_str_put_len (s, p, strlen (p));
}

G_END_DECLS
