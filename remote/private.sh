# gpuaccept_private DIR [parents]: make DIR the window's own directory, or
# refuse it. A node is shared: another user who can guess a path the window
# writes (the run ID is in every window command's argv, which ps shows) can
# plant a link or a directory of theirs there first, and root writing
# through it overwrites whatever the link names. So DIR is created here
# (0700) when missing, and used only when it is a directory, not a link,
# owned by this user and writable by no one else; and every directory
# above it, as the kernel resolves it, is root's or this user's and either
# writable by no one else or sticky (/var/tmp), so no one else can rename
# DIR away and put a link in its place. With "parents" the missing
# directories above DIR are made too (0700); without, DIR's parent must
# exist (a shared filesystem that is not mounted must not turn into a
# local directory). Prints why on stderr and returns 1 when it refuses.
gpuaccept_private() {
	local d=$1 me p u m
	me=$(id -u)
	# "DIR/" would be the link's target to test -L: without the slash.
	while [ "$d" != / ] && [ "${d%/}" != "$d" ]; do d=${d%/}; done
	if [ "${2:-}" = parents ]; then
		(umask 077 && mkdir -p -- "$d") 2>/dev/null
	else
		(umask 077 && mkdir -- "$d") 2>/dev/null
	fi
	if [ -L "$d" ]; then
		echo "gpuaccept: refusing $d: it is a symbolic link (to $(readlink -- "$d" | head -c 200))" >&2
		return 1
	fi
	if [ ! -d "$d" ]; then
		echo "gpuaccept: cannot create the directory $d" >&2
		return 1
	fi
	read -r u m < <(stat -c '%u %a' -- "$d")
	if [ "$u" != "$me" ]; then
		echo "gpuaccept: refusing $d: it is owned by uid $u, not by $(id -un) (uid $me)" >&2
		return 1
	fi
	case $m in *[2367]? | *[2367])
		echo "gpuaccept: refusing $d: other users can write in it (mode $m)" >&2
		return 1
		;;
	esac
	p=$(cd -P -- "$d/.." 2>/dev/null && pwd -P) || { echo "gpuaccept: cannot resolve the directory above $d" >&2; return 1; }
	while :; do
		read -r u m < <(stat -c '%u %a' -- "$p")
		if [ "$u" != 0 ] && [ "$u" != "$me" ]; then
			echo "gpuaccept: refusing $d: $p above it is owned by uid $u, who could replace it" >&2
			return 1
		fi
		case $m in
		[1357]???) ;; # sticky: others may write, not rename what is ours
		*[2367]? | *[2367])
			echo "gpuaccept: refusing $d: other users can write in $p above it (mode $m) and replace it" >&2
			return 1
			;;
		esac
		[ "$p" = / ] && break
		p=${p%/*}
		p=${p:-/}
	done
}
