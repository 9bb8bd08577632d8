/* output.c - file output written safely, and JSON serialisation.
 *
 * What PATH names decides how it is written: "-" and the links of this process's open
 * descriptors (/dev/stdout, /proc/self/fd/N) go through the descriptor; a regular file
 * (or a path not there yet) is written to a temporary file beside it and renamed, so it is
 * whole or untouched; a symbolic link is followed to its target, which is written the
 * same way (the link stays); a device, FIFO or socket is written in place, never replaced.
 * Any failure is MP_ERROR_RUNTIME (exit 1) naming PATH. */
#include "common/output.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Records "cannot write PATH: strerror(ERRNUM)" as MP_ERROR_RUNTIME (exit 1: the input
 * was fine, the machine refused). */
static gboolean
write_failed (GError **error, const char *path, int errnum)
{
  g_set_error (error, MP_ERROR, MP_ERROR_RUNTIME, "cannot write %s: %s", path,
               g_strerror (errnum));
  return FALSE;
}

/* All LEN bytes of DATA to FD; 0 or the errno of the failure. */
static int
write_all (int fd, const char *data, gsize len)
{
  while (len > 0)
    {
      gssize n = write (fd, data, MIN (len, (gsize) G_MAXSSIZE));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return errno;
      if (n == 0)
        return EIO;
      data += n;
      len -= (gsize) n;
    }
  return 0;
}

/* The descriptor N a path such as /proc/self/fd/N or /dev/fd/N stands for, else -1: such
 * a link names an open file of this process (what /dev/stdout leads to), to be written
 * through, never replaced. */
static int
fd_of_path (const char *path)
{
  const char *const prefixes[] = { "/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/" };
  for (guint i = 0; i < G_N_ELEMENTS (prefixes); i++)
    if (g_str_has_prefix (path, prefixes[i]))
      {
        const char *num = path + strlen (prefixes[i]);
        char *end = NULL;
        guint64 fd = g_ascii_strtoull (num, &end, 10);
        if (end != num && *end == '\0' && fd <= G_MAXINT)
          return (int) fd;
      }
  return -1;
}

/* Writes to standard output (or descriptor FD), after what stdio holds. */
static gboolean
write_fd (int fd, const char *name, const char *data, gsize len, GError **error)
{
  if (fflush (stdout) != 0)
    return write_failed (error, name, errno);
  int err = write_all (fd, data, len);
  return err == 0 || write_failed (error, name, err);
}

/* Writes a device, a FIFO or a socket in place: it is not ours to replace. */
static gboolean
write_direct (const char *target, const char *name, const char *data, gsize len,
              GError **error)
{
  int fd = open (target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return write_failed (error, name, errno);
  int err = write_all (fd, data, len);
  if (close (fd) != 0 && err == 0)
    err = errno;
  return err == 0 || write_failed (error, name, err);
}

/* Writes a regular file whole or not at all: a temporary file in the same folder, flushed
 * to disk (ENOSPC and EIO may only show there), then renamed over TARGET; on any failure
 * the temporary file is removed and TARGET is as it was. NAME is the path the user gave. */
static gboolean
write_replacing (const char *target, const char *name, const char *data, gsize len,
                 GError **error)
{
  g_autofree char *dir = g_path_get_dirname (target);
  g_autofree char *base = g_path_get_basename (target);
  g_autofree char *tmp = g_strdup_printf ("%s/.%s.XXXXXX", dir, base);
  int fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0)
    return write_failed (error, name, errno);
  /* mkstemp makes it 0600; a new output gets what the umask allows, as open would, and
   * a replaced file keeps its mode. */
  struct stat st;
  mode_t mask = umask (0);
  umask (mask);
  mode_t mode = stat (target, &st) == 0 ? st.st_mode & 07777 : 0666 & ~mask;
  int err = fchmod (fd, mode) != 0 ? errno : write_all (fd, data, len);
  if (err == 0 && fsync (fd) != 0 && errno != EINVAL)
    err = errno;
  if (close (fd) != 0 && err == 0)
    err = errno;
  if (err == 0 && rename (tmp, target) != 0)
    err = errno;
  if (err != 0)
    {
      unlink (tmp);
      return write_failed (error, name, err);
    }
  return TRUE;
}

gboolean
mp_output_write (const char *path, const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (path != NULL && (data != NULL || len == 0), FALSE);
  if (strcmp (path, "-") == 0)
    return write_fd (STDOUT_FILENO, "standard output", data, len, error);
  /* Follow symbolic links to what they name, so that a link stays a link. */
  g_autofree char *target = g_strdup (path);
  for (int hops = 0;; hops++)
    {
      int fd = fd_of_path (target);
      if (fd >= 0)
        return write_fd (fd, path, data, len, error);
      struct stat st;
      if (lstat (target, &st) != 0)
        {
          if (errno == ENOENT)
            return write_replacing (target, path, data, len, error);
          return write_failed (error, path, errno);
        }
      if (S_ISREG (st.st_mode))
        return write_replacing (target, path, data, len, error);
      if (S_ISDIR (st.st_mode))
        return write_failed (error, path, EISDIR);
      if (!S_ISLNK (st.st_mode))
        return write_direct (target, path, data, len, error);
      if (hops >= 40)
        return write_failed (error, path, ELOOP);
      g_autofree char *link = g_file_read_link (target, NULL);
      if (link == NULL)
        return write_failed (error, path, errno);
      /* A link inside /proc that does not name a path (pipe:[123]) is written through. */
      if (!g_path_is_absolute (link) && g_str_has_prefix (target, "/proc/"))
        return write_direct (target, path, data, len, error);
      g_autofree char *dir = g_path_get_dirname (target);
      g_free (target);
      target = g_path_is_absolute (link) ? g_steal_pointer (&link)
                                         : g_build_filename (dir, link, NULL);
    }
}

char *
mp_json_to_string (JsonNode *root)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_indent (gen, 2);
  json_generator_set_root (gen, root);
  g_autofree char *text = json_generator_to_data (gen, NULL);
  return g_strconcat (text, "\n", NULL);
}

gboolean
mp_json_write (const char *path, JsonNode *root, GError **error)
{
  g_autofree char *text = mp_json_to_string (root);
  return mp_output_write (path, text, strlen (text), error);
}

void
mp_json_add_int (JsonBuilder *b, const char *key, gint64 v)
{
  json_builder_set_member_name (b, key);
  json_builder_add_int_value (b, v);
}

void
mp_json_add_double (JsonBuilder *b, const char *key, double v)
{
  json_builder_set_member_name (b, key);
  if (isfinite (v))
    json_builder_add_double_value (b, v);
  else
    json_builder_add_null_value (b);
}

void
mp_json_add_string (JsonBuilder *b, const char *key, const char *v)
{
  json_builder_set_member_name (b, key);
  if (v != NULL)
    json_builder_add_string_value (b, v);
  else
    json_builder_add_null_value (b);
}

void
mp_json_add_bool (JsonBuilder *b, const char *key, gboolean v)
{
  json_builder_set_member_name (b, key);
  json_builder_add_boolean_value (b, v);
}
