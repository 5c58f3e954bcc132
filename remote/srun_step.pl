# gpuaccept step runner: runs the guard with its stdout and stderr on
# pipes of its own and prints them as short hex lines on the task's
# stdout ("o HEX.", "e HEX."), then "x STATUS SIGNAL." once the guard
# ended. Every line ends with a dot: srun breaks a line that slurmstepd
# passed on in pieces, and the coordinator joins a task's pieces until
# the dot.
# Short lines, because srun --label marks whole lines and cuts them at
# 1 KiB; hex, because the command's output may be any bytes and may end
# without a newline. The guard's stdin (the control stream) is left to
# the guard. Only what Debian's perl-base has (no MIME::Base64): a node
# may have nothing more.
use strict;
use warnings;
use POSIX ();
use Fcntl qw(F_DUPFD);

# A TERM for the step is the guard's to act on (it stops the command
# with its grace); the runner must outlive it to pass on the last words.
$SIG{$_} = 'IGNORE' for qw(TERM HUP INT PIPE);
sub say_ { my $l = shift; syswrite(STDOUT, $l) }

pipe(my $or, my $ow) or do { say_("n pipe: $!.\n"); exit 0 };
pipe(my $er, my $ew) or do { say_("n pipe: $!.\n"); exit 0 };
# The guard's fd 9: it says there when it stopped the command because the
# step's stream fell silent (guard.sh).
pipe(my $gr, my $gw) or do { say_("n pipe: $!.\n"); exit 0 };
my $pid = fork();
defined $pid or do { say_("n fork: $!.\n"); exit 0 };
if ($pid == 0) {
  close $or;
  close $er;
  close $gr;
  # The guard's fd 9 set last, from a copy above it: any of the pipes may
  # itself be fd 9 (the runner inherits what srun's task had open).
  my $g = fcntl($gw, F_DUPFD, 10);
  defined $g or POSIX::_exit(126);
  $g += 0;
  open(STDOUT, '>&', $ow) or POSIX::_exit(126);
  open(STDERR, '>&', $ew) or POSIX::_exit(126);
  close $ow;
  close $ew;
  close $gw;
  POSIX::dup2($g, 9) or POSIX::_exit(126);
  POSIX::close($g);
  # Ignored signals stay ignored across exec: the guard sets its own.
  $SIG{$_} = 'DEFAULT' for qw(TERM HUP INT PIPE);
  no warnings 'exec';
  exec { $ARGV[0] } @ARGV;
  POSIX::_exit(127);
}
close $ow;
close $ew;
close $gw;
my %in = (o => $or, e => $er, g => $gr);
my $lost = 0;
while (%in) {
  my $rin = '';
  vec($rin, fileno($in{$_}), 1) = 1 for keys %in;
  my $n = select(my $rout = $rin, undef, undef, undef);
  next if $n <= 0;
  for my $c (sort keys %in) {
    next unless vec($rout, fileno($in{$c}), 1);
    # 360 bytes: 720 of hex, a line inside srun's 1 KiB.
    my $r = sysread($in{$c}, my $buf, 360);
    next if !defined($r) && $!{EINTR};
    if (!$r) {
      close $in{$c};
      delete $in{$c};
      next;
    }
    if ($c eq 'g') {
      $lost = 1;
      next;
    }
    say_("$c " . unpack('H*', $buf) . ".\n");
  }
}
while (waitpid($pid, 0) < 0 && $!{EINTR}) { }
my $st = $?;
say_("g lost.\n") if $lost;
say_(sprintf("x %d %d.\n", ($st >> 8) & 255, $st & 127));
